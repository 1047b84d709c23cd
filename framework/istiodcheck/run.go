package istiodcheck

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"github.com/ambientmc/ambientmc/topology"
)

// Run is the checks' run: the experiment context they read (its clusters and scale, the join and
// checks flags, how to start an istiod of a check's own, where logs go) and the verdicts so far.
// Every check but those of the data plane
// runs an isolated istiod (Isolated) for the observed cluster, touching neither the suite's istiods
// nor its membership.
type Run struct {
	*expctx.Context

	mu       sync.Mutex
	rows     []report.IstiodCheck
	controls []report.IstiodCheckControl
}

// New is the checks' run of the experiment x.
func New(x *expctx.Context) *Run { return &Run{Context: x} }

// expect is what a client of one of the suite mesh's istiods holds.
func (r *Run) expect() join.Expect { return join.ExpectOf(r.Context) }

// Rows are the checks' outcomes so far, for the report.
func (r *Run) Rows() []report.IstiodCheck {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rows)
}

func (r *Run) record(row report.IstiodCheck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row)
}

// decide runs a check's outcome through the known-issue table: the row as the report keeps it and
// the verdict.
func (r *Run) decide(row report.IstiodCheck, passed bool) (report.IstiodCheck, Verdict) {
	v := Judge(Table, row.Name, r.IstiodVersion, passed, row.Evidence, row.Detail)
	row.Result, row.Reference, row.IstiodVersion = string(v.Result), v.Reference, r.IstiodVersion
	if v.Result != Pass && len(row.Profiles) > 0 {
		v.Message += "; its istiod's profiles: " + strings.Join(row.Profiles, ", ")
	}
	return row, v
}

// verdict records a check's outcome in the report after the known-issues table, logs it, and
// fails or skips the test as the table decides. row carries the check's name, detail, figures and
// evidence. A control's outcome (ctl not nil) is judged against what the control expects instead.
func (r *Run) verdict(t *testing.T, ctl *Control, row report.IstiodCheck, passed bool) {
	t.Helper()
	if ctl != nil {
		c := r.recordControl(ctl, passed, row.Detail)
		r.Logf("istiod check %q, %s: the check said %s: %s", row.Name, ctl.Name(), c.Outcome, c.Verdict)
		if c.Verdict != report.ControlAsExpected {
			t.Errorf("%s: the check said %s with %s: it cannot tell this fault from its absence: %s", ctl.Name(), c.Outcome, ctl.Fault, row.Detail)
		}
		return
	}
	if r.Flags.Checks.Controls && !r.listed(row.Name) {
		for _, c := range ControlsOf(row.Name) {
			if c.Fault == FaultNone {
				r.recordControl(&c, passed, row.Detail)
			}
		}
	}
	row, v := r.decide(row, passed)
	r.record(row)
	r.Logf("istiod check %q: %s: %s", row.Name, v.Result, v.Message)
	switch v.Result {
	case Fail:
		t.Error(v.Message)
	case KnownIssue:
		t.Skip(v.Message)
	}
}

// listed says whether the known-issue table lists the istiod under test for check.
func (r *Run) listed(check string) bool {
	return slices.ContainsFunc(Table, func(k Known) bool { return k.Check == check && affects(k.Affected, r.IstiodVersion) })
}

// broken records a check that could not reach a verdict about istiod (the test itself failed); a
// control without a verdict has no row, which the suite's count of controls reports.
func (r *Run) broken(t *testing.T, ctl *Control, name, detail string) {
	t.Helper()
	if ctl != nil {
		t.Fatalf("%s: no verdict: %s", ctl.Name(), detail)
	}
	r.record(report.IstiodCheck{Name: name, Result: report.CheckFail, Detail: "no verdict: " + detail})
	t.Fatal(detail)
}

// watch connects a ztunnel-like client to istiod i as one of c's ztunnels; it closes when t ends.
func (r *Run) watch(t *testing.T, ctx context.Context, c *cluster.Cluster, i *mesh.Istiod) *xdswatch.Watcher {
	t.Helper()
	w, err := join.StartWatcher(ctx, c, i, r.Mesh.Intermediates[c.Name], t.TempDir())
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// waitQuiet waits until istiod's CPU is quiet after a change (join.Settler.WaitQuiet).
func (r *Run) waitQuiet(t *testing.T, ctx context.Context, i *mesh.Istiod) {
	t.Helper()
	require.NoError(t, join.NewSettler(i, r.Context).WaitQuiet(ctx))
}

// OtherCluster is the cluster the checks pair with c: the first of cs on another network, else
// the first other one.
func OtherCluster(cs []*cluster.Cluster, c *cluster.Cluster) *cluster.Cluster {
	var same *cluster.Cluster
	for _, o := range cs {
		switch topology.RelationOf(c.Cluster, o.Cluster) {
		case topology.OtherNetwork:
			return o
		case topology.SameNetwork:
			if same == nil {
				same = o
			}
		}
	}
	return same
}

// liveHeap estimates istiod's live heap from n readings (LiveHeapStats), half a second apart:
// HeapAlloc right after the GCs is the live heap plus whatever was allocated since, so the noise
// only adds and the least reading is the estimate. It also returns the readings' spread (max - min).
func liveHeap(t *testing.T, ctx context.Context, i *mesh.Istiod, n int) (least, spread float64) {
	t.Helper()
	var got []float64
	for k := range n {
		if k > 0 {
			join.SleepUntil(ctx, time.Now().Add(500*time.Millisecond))
		}
		ms, err := i.Sampler().LiveHeapStats(ctx)
		require.NoError(t, err)
		got = append(got, float64(ms.HeapAlloc))
	}
	return slices.Min(got), slices.Max(got) - slices.Min(got)
}

// krtCollections counts the krt collections istiod's debugger holds, by name. The dump can fail
// on istiod's side: the pinned istiod answers 500 when one collection does not marshal (seen:
// "json: unsupported type: map[types.NamespacedName]map[v1.SectionName]v1.ListenerConditionReason",
// and "MeshNetworksResource: Marshal called with nil" without a meshNetworks source).
func krtCollections(ctx context.Context, i *mesh.Istiod) (int, map[string]int, error) {
	names, err := i.Sampler().KrtCollections(ctx)
	if err != nil {
		return 0, nil, err
	}
	by := map[string]int{}
	for _, n := range names {
		by[n]++
	}
	return len(names), by, nil
}

// scrape reads istiod's metrics or fails the test naming it.
func scrape(t *testing.T, ctx context.Context, i *mesh.Istiod) *measure.Metrics {
	t.Helper()
	m, err := i.Sampler().Scrape(ctx)
	require.NoError(t, err, "scraping istiod %s", i.Cluster())
	return m
}

// secretEvents is the count of remote-secret events istiod's secret controller has handled.
func secretEvents(t *testing.T, ctx context.Context, i *mesh.Istiod) float64 {
	t.Helper()
	var n float64
	for _, s := range scrape(t, ctx, i).Families["remote_cluster_secret_events_total"].GetMetric() {
		n += s.GetCounter().GetValue() + s.GetUntyped().GetValue() + s.GetGauge().GetValue()
	}
	return n
}

// goroutines is istiod's goroutine count (go_goroutines).
func goroutines(t *testing.T, ctx context.Context, i *mesh.Istiod) float64 {
	t.Helper()
	fam := scrape(t, ctx, i).Families["go_goroutines"]
	require.NotNil(t, fam, "istiod %s exports no go_goroutines", i.Cluster())
	return fam.GetMetric()[0].GetGauge().GetValue()
}

// clusterzStatus is what /debug/clusterz says of cluster, or why it could not be read.
func clusterzStatus(ctx context.Context, i *mesh.Istiod, name string) string {
	cs, err := i.Sampler().Clusterz(ctx)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	if st, ok := measure.SyncStatusOf(cs, name); ok {
		return st
	}
	return "not listed"
}

// firstLine is s up to its first newline, at most n bytes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// lastLine is s's last non-empty line.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
