package join

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// StartWatcher connects a ztunnel-like xDS client to istiod i, authenticated with a ztunnel
// certificate from c's own CA (written under dir), as if it ran on c's first node.
func StartWatcher(ctx context.Context, c *cluster.Cluster, i *mesh.Istiod, ca *pki.Intermediate, dir string) (*xdswatch.Watcher, error) {
	return startClient(ctx, c, i, ca, dir, false)
}

// StartLoadClient is StartWatcher for a client that only adds istiod's push work: it keeps
// nothing istiod sends (xdswatch.Config.HoldNothing).
func StartLoadClient(ctx context.Context, c *cluster.Cluster, i *mesh.Istiod, ca *pki.Intermediate, dir string) (*xdswatch.Watcher, error) {
	return startClient(ctx, c, i, ca, dir, true)
}

func startClient(ctx context.Context, c *cluster.Cluster, i *mesh.Istiod, ca *pki.Intermediate, dir string, holdNothing bool) (*xdswatch.Watcher, error) {
	cert, err := ca.Issue(mesh.SystemNamespace, "ztunnel", 0)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "ztunnel-cert")
	if err := cert.WriteDir(certDir); err != nil {
		return nil, err
	}
	ip, err := workload.InternalIP(ctx, c, workload.NodeName(0))
	if err != nil {
		return nil, err
	}
	w, err := xdswatch.Start(ctx, xdswatch.Config{
		Address: i.XDSAddress(), CertDir: certDir, IP: ip.String(),
		Name: "ztunnel-watch", Node: "node-0", Cluster: c.Name, HoldNothing: holdNothing,
	}, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("ztunnel-like watcher on %s: %w", i.XDSAddress(), err)
	}
	return w, nil
}

// XDSClients is how many ztunnel-like clients the observed istiod serves during the joins: flag
// when set, else 15 at published scale (as the harness behind the published figures connected 15
// fake ztunnels per cluster) and 1 below it.
func XDSClients(flag, pods int) int {
	switch {
	case flag > 0:
		return flag
	case pods >= 4000:
		return 15
	default:
		return 1
	}
}
