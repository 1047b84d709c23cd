package experiment

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"istio.io/istio/pilot/pkg/features"

	"github.com/ambientmc/ambientmc/framework/churn"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"github.com/ambientmc/ambientmc/topology"
)

// Churn is the churn experiment in place: the observed istiod, fresh, with every cluster churn can
// track joined, its ztunnel-like clients, and each cluster's pods ready to change. Its report
// section is in the run's report.
type Churn struct {
	r       *Run
	Istiod  *mesh.Istiod
	Watcher *xdswatch.Watcher // the client whose updates are timed
	// Limit is how long a change may take to show before it counts as lost.
	Limit   time.Duration
	Remotes []*cluster.Cluster
	Pods    map[string]*churn.Pods
	Report  *report.Churn
}

// StartChurn puts the churn experiment in place (StartChurn's clusters: ChurnableRemotes), with
// -churn.clients clients on the observed istiod, and checks first what the client sees when a
// remote network's endpoints turn unready (the report's finding). Every replaced pod is put back
// when t ends.
func (r *Run) StartChurn(t *testing.T, ctx context.Context) *Churn {
	t.Helper()
	cf := r.Opts.Churn
	obs := r.ObservedCluster()
	remotes, coalesced := r.ChurnableRemotes(obs)
	for _, c := range coalesced {
		w := fmt.Sprintf("churn: %s stays out of the mesh during churn: it shares %s with another remote cluster, and istiod coalesces a remote network's endpoints into one capacity per service, which churn's per-cluster count cannot follow", c.Name, c.Network)
		r.Logf("%s", w)
		r.Report.Warnings = append(r.Report.Warnings, w)
	}
	// istiod reads its debounce from the environment it inherits from this process; the pinned
	// features package parses it the same way.
	debounceAfter, debounceMax := features.DebounceAfter, features.DebounceMax
	ch := &Churn{r: r, Limit: debounceMax + 5*time.Second, Remotes: remotes, Pods: map[string]*churn.Pods{}}

	members := []string{obs.Name}
	for _, c := range remotes {
		members = append(members, c.Name)
	}
	istiod, measured := r.IstiodFor(t, ctx, members...)
	ch.Istiod, ch.Watcher = istiod, r.StartWatcher(t, ctx, obs, istiod)
	r.WaitHolds(t, ctx, ch.Watcher, members[1:]...)
	for i := 1; i < cf.Clients; i++ {
		// Extra clients only add istiod's push work; the first one is the one measured.
		r.StartWatcher(t, ctx, obs, istiod)
	}
	r.Logf("churn: %d ztunnel-like client(s) on istiod %s; debounce after %s, max %s; a change is lost after %s",
		cf.Clients, obs.Name, debounceAfter, debounceMax, ch.Limit)
	ch.Report = &report.Churn{
		ObservedIstiod: obs.Name, MeasuredIstiod: measured, Clients: cf.Clients, LostAfterMs: ms(ch.Limit),
		Debounce: report.ChurnDebounce{AfterMs: ms(debounceAfter), MaxMs: ms(debounceMax)},
	}
	r.Report.Churn = ch.Report

	otherNetwork := ch.readyPods(t, ctx, obs)
	// Registered after the watchers, so it runs before they close.
	t.Cleanup(func() {
		n, err := churn.RestorePods(ctx, ch.Watcher, slices.Collect(maps.Values(ch.Pods)), ch.Limit)
		require.NoError(t, err)
		r.Logf("churn: %d replaced pods put back as they were", n)
	})
	if otherNetwork != nil {
		if r.Scale.Services < 2 {
			t.Logf("churn: remote readiness finding needs two services (one to fence with); skipped")
		} else {
			var err error
			ch.Report.Finding, err = churn.RemoteUnreadyFinding(ctx, r.Experiment(), ch.Watcher, otherNetwork, ch.Pods[otherNetwork.Name], ch.Limit)
			require.NoError(t, err)
			r.Logf("churn: finding: %s", ch.Report.Finding.Detail)
		}
	}
	return ch
}

// readyPods readies every churned cluster's pods, and returns the first remote cluster on another
// network than obs (the finding is about its split-horizon capacity), or nil.
func (ch *Churn) readyPods(t *testing.T, ctx context.Context, obs *cluster.Cluster) (otherNetwork *cluster.Cluster) {
	t.Helper()
	var err error
	ch.Pods[obs.Name], err = churn.NewPods(ctx, ch.r.Experiment(), obs, nil, ch.Limit)
	require.NoError(t, err)
	for _, c := range ch.Remotes {
		// A cluster on the observed cluster's network shows its pods to the client as workloads of
		// their own, one on another network as split-horizon capacity: churn tracks what shows.
		var keys map[int]string
		if topology.RelationOf(obs.Cluster, c.Cluster) == topology.OtherNetwork {
			keys, err = churn.SplitHorizonKeys(ch.Watcher.Addresses(), c, ch.r.Scale)
			require.NoError(t, err)
			if otherNetwork == nil {
				otherNetwork = c
			}
		}
		ch.Pods[c.Name], err = churn.NewPods(ctx, ch.r.Experiment(), c, keys, ch.Limit)
		require.NoError(t, err)
	}
	return otherNetwork
}

// Targets are the pods a case changes (the observed cluster's, one remote's, every remote's) and
// their clusters; none (false) for a remote case without a remote cluster, which fails t when
// -churn.cases named it and is logged as left out when it was the default.
func (ch *Churn) Targets(t *testing.T, where string) (targets []*churn.Pods, names []string, ok bool) {
	t.Helper()
	r := ch.r
	if where == report.ChurnLocal {
		obs := r.ObservedCluster().Name
		return []*churn.Pods{ch.Pods[obs]}, []string{obs}, true
	}
	if len(ch.Remotes) == 0 {
		if flagSet("churn.cases") {
			t.Errorf("churn case %s needs a remote cluster; -clusters=%d has none (drop it from -churn.cases)", where, len(r.Clusters))
		} else {
			r.Logf("churn: case %s left out: -clusters=%d has no remote cluster", where, len(r.Clusters))
		}
		return nil, nil, false
	}
	for _, c := range ch.Remotes {
		targets, names = append(targets, ch.Pods[c.Name]), append(names, c.Name)
		if where == report.ChurnOneRemote {
			break
		}
	}
	return targets, names, true
}

// Window measures one window of spec s on targets, adds its row to the report, and fails t when a
// change was lost.
func (ch *Churn) Window(t *testing.T, ctx context.Context, s churn.Spec, targets []*churn.Pods) {
	t.Helper()
	m, err := churn.MeasureWindow(ctx, ch.Watcher, ch.Istiod.Sampler(), ch.Limit, s, targets)
	require.NoError(t, err)
	ch.r.Logf("churn: %s", m)
	sum := m.Summary
	assert.True(t, m.Drained || sum.Unseen > 0, "drain ended with changes in flight but none unseen")
	assert.Zero(t, sum.Lost, "lost changes: %d late (over %s), %d never seen, %d keys in a wrong final state (first: %v)",
		sum.Late, ch.Limit, sum.Unseen, sum.Mismatched, m.FirstMismatches(5))
	assert.Positive(t, sum.Samples, "the window made no change")
	if s.Mode == churn.Ready {
		require.NoError(t, churn.RestoreReady(ctx, ch.Watcher, targets, ch.Limit), "pods Ready again at the watcher")
	}
	ch.Report.Runs = append(ch.Report.Runs, m.Row)
}

// Knees finds the knee of every case and mode swept, into the report and the log.
func (ch *Churn) Knees() {
	ch.Report.Knee = churn.Knees(ch.Report.Runs)
	for _, k := range ch.Report.Knee {
		if k.RatePodsPerSecond != nil {
			ch.r.Logf("churn: knee %s %s at %.0f pods/s (p50 at the lowest rate %.0f pods/s: %.1f ms)", k.Where, k.Mode, *k.RatePodsPerSecond, k.BaseRate, k.BaseP50Ms)
		} else {
			ch.r.Logf("churn: no knee for %s %s within the sweep (p50 at %.0f pods/s: %.1f ms)", k.Where, k.Mode, k.BaseRate, k.BaseP50Ms)
		}
	}
}

// PercentsOrNone are the -churn.percents values as a sweep's dimension: one nil (a timed window)
// where none are given.
func PercentsOrNone(ps []float64) []*float64 {
	if len(ps) == 0 {
		return []*float64{nil}
	}
	out := make([]*float64, len(ps))
	for i := range ps {
		out[i] = &ps[i]
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ChurnableRemotes are the remote clusters churn can track: every one on the observed cluster's
// network (their pods show one by one) and, on another network, the first cluster of each; the
// rest of a shared remote network stay out of the mesh while churn runs (coalesced).
func (r *Run) ChurnableRemotes(obs *cluster.Cluster) (remotes, coalesced []*cluster.Cluster) {
	seen := map[string]bool{}
	for _, name := range r.EveryCluster()[1:] {
		c := r.Cluster(name)
		if topology.RelationOf(obs.Cluster, c.Cluster) == topology.OtherNetwork {
			if seen[c.Network] {
				coalesced = append(coalesced, c)
				continue
			}
			seen[c.Network] = true
		}
		remotes = append(remotes, c)
	}
	return remotes, coalesced
}

// flagSet says the command line set flag name (not its default).
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
