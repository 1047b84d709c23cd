package experiment

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/envoyxds"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/proxies"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/xdscount"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// The join method (framework/join) on the run's mesh.

// Expect is what a ztunnel-like client of one of the run mesh's istiods holds.
func (r *Run) Expect() join.Expect {
	return join.ExpectOf(r.Experiment())
}

// StartWatcher connects a ztunnel-like xDS client to istiod as one of c's ztunnels; it closes when
// the test ends.
func (r *Run) StartWatcher(t testing.TB, ctx context.Context, c *cluster.Cluster, i *mesh.Istiod) *xdswatch.Watcher {
	t.Helper()
	w, err := join.StartWatcher(ctx, c, i, r.Mesh.Intermediates[c.Name], t.TempDir())
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// StartLoadClient connects a ztunnel-like client that only adds istiod's push work; it closes
// when the test ends.
func (r *Run) StartLoadClient(t testing.TB, ctx context.Context, c *cluster.Cluster, i *mesh.Istiod) *xdswatch.Watcher {
	t.Helper()
	w, err := join.StartLoadClient(ctx, c, i, r.Mesh.Intermediates[c.Name], t.TempDir())
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// xdsClients are the framework's own xDS clients of one istiod, by kind.
type xdsClients map[string]int

// clientsOf are the framework's clients of cluster's istiod: the test's ztunnel-like ones, and
// the gateways' and waypoints' Envoy clients, with what each kind has received so far.
func (r *Run) clientsOf(cluster string, ztunnels []*xdswatch.Watcher) (xdsClients, map[string]xdscount.Counts) {
	n, counts := xdsClients{}, map[string]xdscount.Counts{}
	for _, w := range ztunnels {
		n[report.ClientZtunnel]++
		counts[report.ClientZtunnel] = counts[report.ClientZtunnel].Plus(w.Counts())
	}
	for kind, k := range map[string]envoyxds.Kind{report.ClientEastWest: envoyxds.EastWest, report.ClientWaypoint: envoyxds.Waypoint} {
		if cs := r.Proxies.Of(cluster, k); len(cs) > 0 {
			n[kind], counts[kind] = len(cs), proxies.Counts(cs)
		}
	}
	return n, counts
}

// xdsSince is what each kind of client received between two readings of clientsOf, as the report
// holds it.
func xdsSince(n xdsClients, before, after map[string]xdscount.Counts) map[string]report.XDSReceived {
	out := map[string]report.XDSReceived{}
	for kind, clients := range n {
		d := after[kind].Since(before[kind])
		t := d.Total()
		x := report.XDSReceived{Clients: clients, Pushes: t.Pushes, Resources: t.Resources, Bytes: t.Bytes, ByType: map[string]report.XDSCount{}}
		for typ, c := range d {
			x.ByType[typ] = report.XDSCount{Pushes: c.Pushes, Resources: c.Resources, Bytes: c.Bytes}
		}
		out[kind] = x
	}
	return out
}

// WaitProxiesReconnected waits until the Envoy clients of cluster's istiod hold a stream to it
// again after it restarted (before: their reconnects until then), so the baseline has them.
func (r *Run) WaitProxiesReconnected(t testing.TB, ctx context.Context, cluster string, before map[*envoyxds.Client]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, r.Proxies.WaitReconnected(ctx, cluster, before))
}

// ServedClients are the clients every istiod of the run serves, by kind, as it lists them; an
// istiod that cannot be asked is left out, with a warning in the report (a figure, not the test).
func (r *Run) ServedClients(ctx context.Context) []report.IstiodClients {
	var out []report.IstiodClients
	for _, name := range r.EveryCluster() {
		i := r.Mesh.Istiods[name]
		if i == nil {
			continue
		}
		cs, err := i.Sampler().Clients(ctx)
		if err != nil {
			r.Report.Warnings = append(r.Report.Warnings, fmt.Sprintf("istiod %s's xDS clients are not in the report: %v", name, err))
			continue
		}
		out = append(out, report.IstiodClients{Istiod: name, Ztunnel: cs[measure.ClientZtunnel], EastWest: cs[measure.ClientEastWest],
			Waypoint: cs[measure.ClientWaypoint], Other: cs[measure.ClientOther]})
	}
	return out
}

// WaitHolds waits until the watcher holds every named cluster.
func (r *Run) WaitHolds(t testing.TB, ctx context.Context, w *xdswatch.Watcher, names ...string) {
	t.Helper()
	var cs []*cluster.Cluster
	for _, n := range names {
		cs = append(cs, r.Cluster(n))
	}
	require.NoError(t, r.Expect().WaitHolds(ctx, w, r.Opts.Join.Timeout, cs...))
}

// JoinAndWait joins c to the mesh and waits for the observed istiod to converge on it.
func (r *Run) JoinAndWait(t testing.TB, ctx context.Context, i *mesh.Istiod, w *xdswatch.Watcher, c *cluster.Cluster) (join.Convergence, time.Time) {
	t.Helper()
	start := time.Now()
	require.NoError(t, r.Mesh.Join(ctx, c.Name))
	conv, err := r.Expect().WaitJoined(ctx, i, w, c, start, r.Opts.Join.Timeout)
	require.NoError(t, err)
	return conv, start
}

// ReadCPU reads istiod's CPU time or fails the test naming it.
func (r *Run) ReadCPU(t testing.TB, ctx context.Context, i *mesh.Istiod) measure.CPUReading {
	t.Helper()
	cpu, err := join.ReadCPU(ctx, i)
	require.NoError(t, err)
	return cpu
}

// Scrape reads istiod's metrics or fails the test naming it.
func (r *Run) Scrape(t testing.TB, ctx context.Context, i *mesh.Istiod) *measure.Metrics {
	t.Helper()
	m, err := i.Sampler().Scrape(ctx)
	require.NoError(t, err, "scraping istiod %s", i.Cluster())
	return m
}
