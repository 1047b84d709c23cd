package multicluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// probeEnv is the provider's data plane with its probe workloads: a client in the observed
// cluster, echo servers there and in a second primary.
type probeEnv struct {
	cluster.ProbeEnv
	local, remote *cluster.Cluster
}

// dataPlaneOnce starts the probe environment once for the package.
type dataPlaneOnce struct {
	once sync.Once
	p    *probeEnv
	err  error
}

// errNoIstiods says the run did not start the istiods the data plane needs.
var errNoIstiods = errors.New("the data plane needs istiod in the client's cluster and in a second primary: run with -mesh.istiods=all")

// readyTimeout bounds how long traffic may take to flow once the probe clusters are joined.
const readyTimeout = 30 * time.Second

// dataPlane gives a test the probe environment (deployed once for the package, torn down with the
// environment) in the state it needs: the probe clusters are members (until the test ends), the
// client has a fresh xDS stream where the provider can give one (a stream that lived through
// another test's leave and rejoin would carry that history with it, and TestIstiodProperties
// checks that an istiod serves such a stream right), and traffic flows.
func dataPlane(t *testing.T, ctx context.Context) *probeEnv {
	t.Helper()
	if len(mc.Clusters) < 2 {
		t.Skip("the data-plane suites need at least two clusters")
	}
	mc.dp.once.Do(func() { mc.dp.p, mc.dp.err = startDataPlane(mc.RunContext()) })
	p, err := mc.dp.p, mc.dp.err
	if errors.Is(err, errNoIstiods) {
		t.Skip(err)
	}
	require.NoError(t, err)
	needMembers(t, ctx, p.local.Name, p.remote.Name)
	if r, ok := p.ProbeEnv.(clientRestarter); ok {
		require.NoError(t, r.RestartClient(ctx), "a fresh xDS stream for the probe client")
	}
	require.NoError(t, p.Ready(ctx, readyTimeout))
	mc.Report.DataPlane = mc.Provider.DataPlane()
	return p
}

// clientRestarter is offered by data planes whose client can be given a fresh xDS stream.
type clientRestarter interface {
	RestartClient(ctx context.Context) error
}

func startDataPlane(ctx context.Context) (*probeEnv, error) {
	local := mc.observed()
	var remote *cluster.Cluster
	for _, c := range mc.Clusters {
		if c.Name != local.Name && c.IsPrimary() {
			remote = c
			break
		}
	}
	for _, c := range []*cluster.Cluster{local, remote} {
		if remote == nil || mc.mesh.Istiods[c.Name] == nil {
			return nil, errNoIstiods
		}
	}
	mc.Logf("dataplane: deploying probes in %s and %s", local.Name, remote.Name)
	pe, err := mc.Provider.Probes().DeployProbes(ctx, cluster.ProbeSetup{
		Clusters: mc.Clusters, Local: local, Remote: remote,
		Istiods: mc.mesh.Istiods, CAs: mc.mesh.Intermediates, Roots: mc.mesh.Root.Pool(),
		Dir: filepath.Join(mc.RunDir, "dataplane"), Logf: mc.Logf,
	})
	if err != nil {
		return nil, err
	}
	p := &probeEnv{ProbeEnv: pe, local: local, remote: remote}
	mc.Cleanup("stop the data plane", p.Close)
	mc.Logf("dataplane: deployed (client in %s, echo servers in %s and %s)", local.Name, local.Name, remote.Name)
	return p, nil
}

// path reads the provider's path counters or fails the test.
func (p *probeEnv) path(t *testing.T, ctx context.Context) cluster.PathCounters {
	t.Helper()
	pc, err := p.Path(ctx)
	require.NoError(t, err, "reading the data plane's counters")
	return pc
}

// served is how many requests app's endpoint in c served, by the counters pc.
func served(pc cluster.PathCounters, c *cluster.Cluster, app string) int64 {
	return pc.Served[c.Name+"/"+app]
}

// describe names a probe endpoint in messages.
func describe(c *cluster.Cluster, app string) string { return fmt.Sprintf("%s in %s", app, c.Name) }
