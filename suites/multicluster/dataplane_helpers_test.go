package multicluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/suites/multicluster/options"
)

// probeEnv is the provider's data plane with its probe workloads: a client in the observed
// cluster, echo servers there, in a primary on another network (remote) and in one on the same
// network (peer), where the topology has them.
type probeEnv struct {
	cluster.ProbeEnv
	setup               cluster.ProbeSetup
	local, remote, peer *cluster.Cluster
}

// dataPlaneOnce starts the probe environment once for the package.
type dataPlaneOnce struct {
	once sync.Once
	p    *probeEnv
	err  error
}

// readyTimeout bounds how long traffic may take to flow once the probe clusters are joined.
const readyTimeout = 30 * time.Second

// dataPlane gives a test the probe environment (deployed once for the package, torn down with the
// environment) in the state it needs: the probe clusters are members (until the test ends), the
// client has a fresh xDS stream where the provider can give one (a stream that lived through
// another test's leave and rejoin would carry that history with it, and TestIstiodProperties
// checks that an istiod serves such a stream right), and traffic flows.
func dataPlane(t *testing.T, ctx context.Context) *probeEnv {
	t.Helper()
	if why := plan.Unmet(mc.planIn, options.DataPlaneNeeds...); why != "" {
		t.Skip(why)
	}
	probesInPlace(t)
	p, err := mc.dp.p, mc.dp.err
	require.NoError(t, err, "the data plane's needs are met, so its probes must start")
	var members []string
	for _, c := range p.setup.Servers() {
		members = append(members, c.Name)
	}
	needMembers(t, ctx, members...)
	if r, ok := p.ProbeEnv.(cluster.ClientRestarter); ok {
		require.NoError(t, r.RestartClient(ctx), "a fresh xDS stream for the probe client")
	}
	require.NoError(t, p.Ready(ctx, readyTimeout))
	mc.Report.DataPlane = mc.Provider.DataPlane()
	return p
}

// probesInPlace starts the data-plane probes (their pods, services and ztunnel-like clients) if
// no test has yet, wherever the data plane runs. The control-plane suites call it before their
// baseline so that what a join or leave brings is the same in any test order: run after a
// data-plane test, a join at 3 clusters measured 4.4-4.9 MB of live heap per remote cluster
// against 3.8-3.9 MB before one (the probes' pods and clients in the joined clusters).
func probesInPlace(t *testing.T) {
	t.Helper()
	if plan.Unmet(mc.planIn, options.DataPlaneNeeds...) != "" {
		return
	}
	mc.dp.once.Do(func() { mc.dp.p, mc.dp.err = startDataPlane(mc.RunContext()) })
	require.NoError(t, mc.dp.err, "the data-plane probes")
}

func startDataPlane(ctx context.Context) (*probeEnv, error) {
	probes, ok := mc.Provider.(cluster.Probes)
	if !ok {
		// options.NeedDataPlane said it does: the provider's DataPlane and its Probes disagree.
		return nil, fmt.Errorf("provider %s declares data plane %s but offers no probes (cluster.Probes)", mc.Provider.Name(), mc.Provider.DataPlane())
	}
	local := mc.observed()
	s := cluster.ProbeSetup{Clusters: mc.Clusters, Local: local,
		Istiods: mc.mesh.Handles(), CAs: mc.mesh.CAs(), Roots: mc.mesh.Root.Pool(),
		Dir: filepath.Join(mc.RunDir, "dataplane"), Logf: mc.Logf}
	s.ChooseServers(func(c *cluster.Cluster) bool { return mc.mesh.Istiods[c.Name] != nil })
	if mc.mesh.Istiods[local.Name] == nil || s.Failover() == nil {
		// options.NeedTwoIstiods said they run.
		return nil, fmt.Errorf("no istiod in %s and another primary, though the run starts %d istiods", local.Name, mc.planIn.Istiods)
	}
	mc.Logf("dataplane: deploying probes: client in %s, other network %s, same network %s", local.Name, nameOr(s.Remote, "none"), nameOr(s.Peer, "none"))
	pe, err := probes.DeployProbes(ctx, s)
	if err != nil {
		return nil, err
	}
	p := &probeEnv{ProbeEnv: pe, setup: s, local: local, remote: s.Remote, peer: s.Peer}
	mc.Cleanup("stop the data plane", p.Close)
	mc.Logf("dataplane: deployed")
	return p, nil
}

// other is the probe cluster traffic to another cluster goes to, and its app: the other network's
// (echo-remote) where the topology has one, else the peer on the client's network (echo-peer).
func (p *probeEnv) other() (*cluster.Cluster, string) {
	if p.remote != nil {
		return p.remote, cluster.EchoRemote
	}
	return p.peer, cluster.EchoPeer
}

// nameOr is c's name, or none when c is nil.
func nameOr(c *cluster.Cluster, none string) string {
	if c == nil {
		return none
	}
	return c.Name
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
