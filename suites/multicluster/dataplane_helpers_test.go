package multicluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
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

var (
	dpOnce sync.Once
	dp     *probeEnv
	dpErr  error
)

// errNoIstiods says the run did not start the istiods the data plane needs.
var errNoIstiods = errors.New("the data plane needs istiod in the client's cluster and in a second primary: run with -mesh.istiods=all")

// readyTimeout bounds how long traffic may take to flow once the probe clusters are joined.
const readyTimeout = 30 * time.Second

// dataPlane sets up the probe environment once for all data-plane tests (it is torn down with the
// environment) and makes sure, on every call, that its clusters are joined and traffic flows:
// other tests may have taken clusters out of the mesh in between.
func dataPlane(t *testing.T) *probeEnv {
	t.Helper()
	if len(mc.Clusters) < 2 {
		t.Skip("the data-plane suites need at least two clusters")
	}
	dpOnce.Do(func() { dp, dpErr = startDataPlane(context.Background()) })
	if errors.Is(dpErr, errNoIstiods) {
		t.Skip(dpErr)
	}
	require.NoError(t, dpErr)
	require.NoError(t, dp.ready(context.Background()))
	mc.Report.DataPlane = mc.Provider.DataPlane()
	return dp
}

// clientRestarter is offered by data planes whose client can be given a fresh xDS stream.
type clientRestarter interface {
	RestartClient(ctx context.Context) error
}

// ready joins the probe clusters if needed and waits until traffic flows. After a cluster leaves
// and rejoins, a long-lived delta xDS stream has been seen to keep lacking the rejoined cluster's
// split-horizon workloads (TestIstiodProperties checks for it); to keep the latency figures
// meaningful the client then gets a fresh stream once, and the report counts that recovery.
func (p *probeEnv) ready(ctx context.Context) error {
	if err := joinEach(ctx, p.local, p.remote); err != nil {
		return err
	}
	err := p.Ready(ctx, readyTimeout)
	r, ok := p.ProbeEnv.(clientRestarter)
	if err == nil || !ok {
		return err
	}
	mc.Logf("dataplane: %v; recovering: restarting the client's xDS stream", err)
	mc.Report.Warnings = append(mc.Report.Warnings, fmt.Sprintf("data plane recovered by restarting the client's xDS stream after: %v", err))
	recoveries.Add(1)
	if err := r.RestartClient(ctx); err != nil {
		return err
	}
	return p.Ready(ctx, readyTimeout)
}

// recoveries counts data-plane recoveries over the run.
var recoveries atomic.Int64

func startDataPlane(ctx context.Context) (*probeEnv, error) {
	local, err := observed(mc)
	if err != nil {
		return nil, err
	}
	var remote *cluster.Cluster
	for _, c := range mc.Clusters {
		if c.Name != local.Name && c.IsPrimary() {
			remote = c
			break
		}
	}
	for _, c := range []*cluster.Cluster{local, remote} {
		if remote == nil || ambient.Istiods[c.Name] == nil {
			return nil, errNoIstiods
		}
	}
	mc.Logf("dataplane: deploying probes in %s and %s", local.Name, remote.Name)
	pe, err := mc.Provider.Probes().DeployProbes(ctx, cluster.ProbeSetup{
		Clusters: mc.Clusters, Local: local, Remote: remote,
		Istiods: ambient.Istiods, CAs: ambient.Intermediates, Roots: ambient.Root.Pool(),
		Dir: filepath.Join(mc.RunDir, "dataplane"), Logf: mc.Logf,
	})
	if err != nil {
		return nil, err
	}
	p := &probeEnv{ProbeEnv: pe, local: local, remote: remote}
	mc.Cleanup("stop the data plane", p.Close)
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	mc.Logf("dataplane: ready (client in %s, echo servers in %s and %s)", local.Name, local.Name, remote.Name)
	return p, nil
}

// joinEach makes sure the given clusters are in the mesh (joining what is missing).
func joinEach(ctx context.Context, cs ...*cluster.Cluster) error {
	obs, err := observed(mc)
	if err != nil {
		return err
	}
	i := ambient.Istiods[obs.Name]
	for _, c := range cs {
		if slices.Contains(ambient.Joined(), c.Name) {
			continue
		}
		start := time.Now()
		if err := ambient.Join(ctx, c.Name); err != nil {
			return err
		}
		if c.Name == obs.Name {
			continue
		}
		if _, err := waitJoined(ctx, i, nil, c, start, mc.Flags.JoinTimeout); err != nil {
			return err
		}
	}
	return nil
}

// path reads the provider's path counters or fails the test.
func (p *probeEnv) path(t *testing.T) cluster.PathCounters {
	t.Helper()
	pc, err := p.Path(context.Background())
	require.NoError(t, err, "reading the data plane's counters")
	return pc
}

// served is how many requests app's endpoint in c served, by the counters pc.
func served(pc cluster.PathCounters, c *cluster.Cluster, app string) int64 {
	return pc.Served[c.Name+"/"+app]
}

// describe names a probe endpoint in messages.
func describe(c *cluster.Cluster, app string) string { return fmt.Sprintf("%s in %s", app, c.Name) }
