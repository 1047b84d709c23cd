package multicluster

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
	"github.com/ambientmc/ambientmc/framework/proxies"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/xdscount"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// The join method (framework/join) as the suites use it on the suite's mesh.

// expect is what a ztunnel-like client of one of the suite mesh's istiods holds.
func expect() join.Expect {
	return join.Expect{Scale: mc.scale, Clusters: mc.Clusters, Members: mc.mesh.Joined, Gateway: mc.mesh.GatewayAddress}
}

// joinOptions are the join flags as the method reads them.
func joinOptions() join.Options {
	j := mc.opts.Join
	return join.Options{Settle: j.Settle, Steady: j.Steady, Samples: j.Samples, Timeout: j.Timeout}
}

// startWatcher connects a ztunnel-like xDS client to istiod as one of c's ztunnels; it closes when
// the test ends.
func startWatcher(t *testing.T, ctx context.Context, c *cluster.Cluster, i join.Istiod) *xdswatch.Watcher {
	t.Helper()
	w, err := join.StartWatcher(ctx, c, i, mc.mesh.Intermediates[c.Name], t.TempDir())
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// startLoadClient connects a ztunnel-like client that only adds istiod's push work; it closes
// when the test ends.
func startLoadClient(t *testing.T, ctx context.Context, c *cluster.Cluster, i join.Istiod) *xdswatch.Watcher {
	t.Helper()
	w, err := join.StartLoadClient(ctx, c, i, mc.mesh.Intermediates[c.Name], t.TempDir())
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// xdsClients are the framework's own xDS clients of one istiod, by kind.
type xdsClients map[string]int

// clientsOf are the framework's clients of cluster's istiod: the test's ztunnel-like ones, and
// the gateways' and waypoints' Envoy clients, with what each kind has received so far.
func clientsOf(cluster string, ztunnels []*xdswatch.Watcher) (xdsClients, map[string]xdscount.Counts) {
	n, counts := xdsClients{}, map[string]xdscount.Counts{}
	for _, w := range ztunnels {
		n[report.ClientZtunnel]++
		counts[report.ClientZtunnel] = counts[report.ClientZtunnel].Plus(w.Counts())
	}
	for kind, k := range map[string]envoyxds.Kind{report.ClientEastWest: envoyxds.EastWest, report.ClientWaypoint: envoyxds.Waypoint} {
		if cs := mc.proxies.Of(cluster, k); len(cs) > 0 {
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

// waitProxiesReconnected waits until the Envoy clients of cluster's istiod hold a stream to it
// again after it restarted (before: their reconnects until then), so the baseline has them.
func waitProxiesReconnected(t *testing.T, ctx context.Context, cluster string, before map[*envoyxds.Client]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, mc.proxies.WaitReconnected(ctx, cluster, before))
}

// servedClients are the clients every istiod of the run serves, by kind, as it lists them; an
// istiod that cannot be asked is left out, with a warning in the report (a figure, not the test).
func servedClients(ctx context.Context) []report.IstiodClients {
	var out []report.IstiodClients
	for _, name := range everyCluster() {
		i := mc.mesh.Istiods[name]
		if i == nil {
			continue
		}
		cs, err := i.Sampler().Clients(ctx)
		if err != nil {
			mc.Report.Warnings = append(mc.Report.Warnings, fmt.Sprintf("istiod %s's xDS clients are not in the report: %v", name, err))
			continue
		}
		out = append(out, report.IstiodClients{Istiod: name, Ztunnel: cs[measure.ClientZtunnel], EastWest: cs[measure.ClientEastWest],
			Waypoint: cs[measure.ClientWaypoint], Other: cs[measure.ClientOther]})
	}
	return out
}

// waitHolds waits until the watcher holds every named cluster.
func waitHolds(t *testing.T, ctx context.Context, w *xdswatch.Watcher, names ...string) {
	t.Helper()
	var cs []*cluster.Cluster
	for _, n := range names {
		cs = append(cs, mc.Cluster(n))
	}
	require.NoError(t, expect().WaitHolds(ctx, w, mc.opts.Join.Timeout, cs...))
}

// joinAndWait joins c to the mesh and waits for the observed istiod to converge on it.
func joinAndWait(t *testing.T, ctx context.Context, i join.Istiod, w *xdswatch.Watcher, c *cluster.Cluster) (join.Convergence, time.Time) {
	t.Helper()
	start := time.Now()
	require.NoError(t, mc.mesh.Join(ctx, c.Name))
	conv, err := expect().WaitJoined(ctx, i, w, c, start, mc.opts.Join.Timeout)
	require.NoError(t, err)
	return conv, start
}

// readCPU reads istiod's CPU time or fails the test naming it.
func readCPU(t *testing.T, ctx context.Context, i join.Istiod) measure.CPUReading {
	t.Helper()
	r, err := join.ReadCPU(ctx, i)
	require.NoError(t, err)
	return r
}

// scrape reads istiod's metrics or fails the test naming it.
func scrape(t *testing.T, ctx context.Context, i join.Istiod) *measure.Metrics {
	t.Helper()
	m, err := i.Sampler().Scrape(ctx)
	require.NoError(t, err, "scraping istiod %s", i.Cluster())
	return m
}
