package experiment

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
	"github.com/ambientmc/ambientmc/framework/probe"
)

// Probes are the provider's data plane with its probe workloads: a client in the observed
// cluster (Local), echo servers there, in a primary on another network (Remote) and in one on the
// same network (Peer), where the topology has them.
type Probes struct {
	probe.Env
	Setup               probe.Setup
	Local, Remote, Peer *cluster.Cluster
}

// dataPlaneOnce starts the probe environment once for the package.
type dataPlaneOnce struct {
	once sync.Once
	p    *Probes
	err  error
}

// readyTimeout bounds how long traffic may take to flow once the probe clusters are joined.
const readyTimeout = 30 * time.Second

// DataPlane gives a test the probe environment (deployed once for the package, torn down with the
// environment) in the state it needs: the probe clusters are members (until the test ends), the
// client has a fresh xDS stream where the provider can give one (a stream that lived through
// another test's leave and rejoin would carry that history with it, and TestIstiodProperties
// checks that an istiod serves such a stream right), and traffic flows.
func (r *Run) DataPlane(t testing.TB, ctx context.Context) *Probes {
	t.Helper()
	if why := plan.Unmet(r.PlanIn, DataPlaneNeeds...); why != "" {
		t.Skip(why)
	}
	r.ProbesInPlace(t)
	p, err := r.dp.p, r.dp.err
	require.NoError(t, err, "the data plane's needs are met, so its probes must start")
	var members []string
	for _, c := range p.Setup.Servers() {
		members = append(members, c.Name)
	}
	r.NeedMembers(t, ctx, members...)
	if r, ok := p.Env.(probe.ClientRestarter); ok {
		require.NoError(t, r.RestartClient(ctx), "a fresh xDS stream for the probe client")
	}
	require.NoError(t, p.Ready(ctx, readyTimeout))
	r.Report.DataPlane = r.Provider.Facts().DataPlane
	return p
}

// ProbesInPlace starts the data-plane probes (their pods, services and ztunnel-like clients) if
// no test has yet, wherever the data plane runs. The control-plane suites call it before their
// baseline so that what a join or leave brings is the same in any test order: run after a
// data-plane test, a join at 3 clusters measured 4.4-4.9 MB of live heap per remote cluster
// against 3.8-3.9 MB before one (the probes' pods and clients in the joined clusters).
func (r *Run) ProbesInPlace(t testing.TB) {
	t.Helper()
	if plan.Unmet(r.PlanIn, DataPlaneNeeds...) != "" {
		return
	}
	r.dp.once.Do(func() { r.dp.p, r.dp.err = r.startDataPlane(r.RunContext()) })
	require.NoError(t, r.dp.err, "the data-plane probes")
}

func (r *Run) startDataPlane(ctx context.Context) (*Probes, error) {
	probes, ok := r.Provider.(probe.Deployer)
	if !ok {
		// options.NeedDataPlane said it does: the provider's DataPlane and its Probes disagree.
		return nil, fmt.Errorf("provider %s declares data plane %s but offers no probes (probe.Deployer)", r.Provider.Name(), r.Provider.Facts().DataPlane)
	}
	local := r.ObservedCluster()
	s := probe.Setup{Clusters: r.Clusters, Local: local,
		Istiods: r.Mesh.Handles(), CAs: r.Mesh.CAs(), Roots: r.Mesh.Root.Pool(),
		Dir: filepath.Join(r.RunDir, "dataplane"), Logf: r.Logf}
	s.ChooseServers(func(c *cluster.Cluster) bool { return r.Mesh.Istiods[c.Name] != nil })
	if r.Mesh.Istiods[local.Name] == nil || s.Failover() == nil {
		// options.NeedTwoIstiods said they run.
		return nil, fmt.Errorf("no istiod in %s and another primary, though the run starts %d istiods", local.Name, r.PlanIn.Istiods)
	}
	r.Logf("dataplane: deploying probes: client in %s, other network %s, same network %s", local.Name, nameOr(s.Remote, "none"), nameOr(s.Peer, "none"))
	pe, err := probes.DeployProbes(ctx, s)
	if err != nil {
		return nil, err
	}
	p := &Probes{Env: pe, Setup: s, Local: local, Remote: s.Remote, Peer: s.Peer}
	r.Cleanup("stop the data plane", p.Close)
	r.Logf("dataplane: deployed")
	return p, nil
}

// Other is the probe cluster traffic to another cluster goes to, and its app: the other network's
// (echo-remote) where the topology has one, else the peer on the client's network (echo-peer).
func (p *Probes) Other() (*cluster.Cluster, string) {
	if p.Remote != nil {
		return p.Remote, probe.EchoRemote
	}
	return p.Peer, probe.EchoPeer
}

// nameOr is c's name, or none when c is nil.
func nameOr(c *cluster.Cluster, none string) string {
	if c == nil {
		return none
	}
	return c.Name
}

// Counters reads the provider's path counters or fails the test.
func (p *Probes) Counters(t testing.TB, ctx context.Context) probe.PathCounters {
	t.Helper()
	pc, err := p.Path(ctx)
	require.NoError(t, err, "reading the data plane's counters")
	return pc
}

// Served is how many requests app's endpoint in c served, by the counters pc.
func Served(pc probe.PathCounters, c *cluster.Cluster, app string) int64 {
	return pc.Served[c.Name+"/"+app]
}

// Describe names a probe endpoint in messages.
func Describe(c *cluster.Cluster, app string) string { return fmt.Sprintf("%s in %s", app, c.Name) }
