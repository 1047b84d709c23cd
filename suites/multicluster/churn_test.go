package multicluster

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"istio.io/istio/pilot/pkg/features"

	"github.com/ambientmc/ambientmc/framework/churn"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"github.com/ambientmc/ambientmc/topology"
)

// TestChurn measures how fast endpoint changes reach a ztunnel-like client of the observed istiod
// and what the churn costs that istiod: with every cluster joined, pods change at each rate of
// -churn.rates in the observed cluster, in one remote cluster, then in all remote clusters at once
// (the rate shared among them, so the work is the same at any cluster count). It first checks what
// the client sees when remote endpoints turn unready (a finding).
func TestChurn(t *testing.T) {
	cf := mc.opts.Churn
	ctx := mc.Context(t)
	obs := mc.observed()
	remotes, coalesced := churnableRemotes(obs)
	for _, c := range coalesced {
		w := fmt.Sprintf("churn: %s stays out of the mesh during churn: it shares %s with another remote cluster, and istiod coalesces a remote network's endpoints into one capacity per service, which churn's per-cluster count cannot follow", c.Name, c.Network)
		mc.Logf("%s", w)
		mc.Report.Warnings = append(mc.Report.Warnings, w)
	}
	// istiod reads its debounce from the environment it inherits from this process; the pinned
	// features package parses it the same way.
	debounceAfter, debounceMax := features.DebounceAfter, features.DebounceMax
	limit := debounceMax + 5*time.Second

	members := []string{obs.Name}
	for _, c := range remotes {
		members = append(members, c.Name)
	}
	istiod, measured := istiodFor(t, ctx, members...)
	w := startWatcher(t, ctx, obs, istiod)
	waitHolds(t, ctx, w, members[1:]...)
	for i := 1; i < cf.Clients; i++ {
		// Extra clients only add istiod's push work; the first one is the one measured.
		startWatcher(t, ctx, obs, istiod)
	}
	mc.Logf("churn: %d ztunnel-like client(s) on istiod %s; debounce after %s, max %s; a change is lost after %s",
		cf.Clients, obs.Name, debounceAfter, debounceMax, limit)

	rep := &report.Churn{
		ObservedIstiod: obs.Name, MeasuredIstiod: measured, Clients: cf.Clients, LostAfterMs: ms(limit),
		Debounce: report.ChurnDebounce{AfterMs: ms(debounceAfter), MaxMs: ms(debounceMax)},
	}
	mc.Report.Churn = rep

	pods := map[string]*churn.Pods{}
	var err error
	pods[obs.Name], err = churn.NewPods(ctx, obs, mc.scale, nil, limit)
	require.NoError(t, err)
	var otherNetwork *cluster.Cluster // the finding is about split-horizon capacity
	for _, c := range remotes {
		// A cluster on the observed cluster's network shows its pods to the client as workloads of
		// their own, one on another network as split-horizon capacity: churn tracks what shows.
		var keys map[int]string
		if relationTo(w, c) == topology.OtherNetwork {
			keys, err = splitHorizonKeys(w, c)
			require.NoError(t, err)
			if otherNetwork == nil {
				otherNetwork = c
			}
		}
		pods[c.Name], err = churn.NewPods(ctx, c, mc.scale, keys, limit)
		require.NoError(t, err)
	}
	// Registered after the watchers, so it runs before they close.
	t.Cleanup(func() { restorePods(t, ctx, w, slices.Collect(maps.Values(pods)), limit) })

	if otherNetwork != nil {
		rep.Finding = remoteUnreadyFinding(t, ctx, w, obs.Name, otherNetwork, pods[otherNetwork.Name], limit)
	}

	for _, where := range cf.Cases {
		var targets []*churn.Pods
		var names []string
		switch where {
		case report.ChurnLocal:
			targets, names = []*churn.Pods{pods[obs.Name]}, []string{obs.Name}
		case report.ChurnOneRemote, report.ChurnAllRemote:
			if len(remotes) == 0 {
				t.Errorf("churn case %s needs a remote cluster; -clusters=%d has none (drop it from -churn.cases)", where, len(mc.Clusters))
				continue
			}
			for _, c := range remotes {
				targets, names = append(targets, pods[c.Name]), append(names, c.Name)
				if where == report.ChurnOneRemote {
					break
				}
			}
		}
		for _, mode := range cf.Modes {
			if mode == churn.Ready && where != report.ChurnLocal {
				continue // remote readiness is the finding above, not a latency
			}
			for _, rate := range cf.Rates {
				for _, pct := range percentsOrNone(cf.Percents) {
					name := fmt.Sprintf("where=%s/mode=%s/rate=%s", where, mode, strconv.FormatFloat(rate, 'f', -1, 64))
					if pct != nil {
						name += "/percent=" + strconv.FormatFloat(*pct, 'f', -1, 64)
					}
					t.Run(name, func(t *testing.T) {
						run := churnWindow(t, ctx, w, istiod, limit, churnSpec{where: where, mode: mode, rate: rate, percent: pct, clusters: names, length: cf.Duration}, targets)
						rep.Runs = append(rep.Runs, run)
					})
				}
			}
		}
	}
	rep.Knee = knees(rep.Runs)
	for _, k := range rep.Knee {
		if k.RatePodsPerSecond != nil {
			mc.Logf("churn: knee %s %s at %.0f pods/s (p50 at the lowest rate %.0f pods/s: %.1f ms)", k.Where, k.Mode, *k.RatePodsPerSecond, k.BaseRate, k.BaseP50Ms)
		} else {
			mc.Logf("churn: no knee for %s %s within the sweep (p50 at %.0f pods/s: %.1f ms)", k.Where, k.Mode, k.BaseRate, k.BaseP50Ms)
		}
	}
}

type churnSpec struct {
	where, mode string
	rate        float64
	percent     *float64
	clusters    []string
	length      time.Duration
}

// churnWindow runs one window and returns its report row; it fails the test when a change was
// lost.
func churnWindow(t *testing.T, ctx context.Context, w *xdswatch.Watcher, istiod cluster.Istiod, limit time.Duration, s churnSpec, targets []*churn.Pods) report.ChurnRun {
	tr := churn.NewTracker(nil)
	snap, unsubscribe := w.Subscribe(func(u xdswatch.Update) { tr.Observe(u.Name, churn.StateOf(u.Name, u.Address), u.At) })
	defer unsubscribe()
	tr.Seed(churn.States(snap))

	// The rate is shared among the targets: the window does the same work however many there are.
	win := churn.Window{Mode: s.mode, Rate: s.rate / float64(len(targets)), Duration: s.length}
	if s.percent != nil {
		win.Count = int(math.Ceil(*s.percent / 100 * float64(targets[0].Len())))
	}
	// The cost window runs until every change showed: istiod's debounced pushes for the last
	// changes belong to this window.
	before, cpuBefore := scrape(t, ctx, istiod), readCPU(t, ctx, istiod)
	churned, err := churn.Run(ctx, tr, win, targets...)
	require.NoError(t, err, "churn %s", s.where)
	drained := churn.Drain(ctx, tr, limit)
	cpuAfter, after := readCPU(t, ctx, istiod), scrape(t, ctx, istiod)

	truth := map[string]string{}
	for _, p := range targets {
		tt, err := p.Truth(ctx)
		require.NoError(t, err)
		for k, v := range tt {
			truth[k] = v
		}
	}
	mismatched := tr.Mismatches(truth)
	sum := churn.Summarize(tr.Results(), limit, len(mismatched))
	cost, err := churn.CostBetween(cpuBefore, cpuAfter, before, after)
	require.NoError(t, err)
	settled, err := istiod.Sampler().Settled(ctx, 1, time.Second)
	require.NoError(t, err)

	run := report.ChurnRun{
		Where: s.where, Mode: s.mode, RatePodsPerSecond: s.rate, PercentOfPods: s.percent, Clusters: s.clusters,
		AchievedPodsPerSecond: churned.AchievedRate(1), DurationSeconds: churned.Elapsed.Seconds(), CostSeconds: cost.Seconds,
		Changes: churned.Changes, Dropped: churned.Dropped, Samples: sum.Samples, Superseded: sum.Superseded, Lost: sum.Lost,
		P50Ms: msp(sum.P50), P90Ms: msp(sum.P90), P99Ms: msp(sum.P99), MaxMs: msp(sum.Max),
		IstiodCPUCores: report.F(cost.CPUCores), IstiodCPUResolutionCores: report.F(cost.ResolutionCores),
		IstiodCPUSource: cost.CPUSource, PushesPerSecond: cost.PushesPerSecond, PushesPerSecondByType: cost.ByType,
		ConnectedXDSClients: cost.ConnectedXDS,
		RSSBytes:            report.F(settled.RSSBytes), LiveHeapBytes: report.F(settled.LiveHeapBytes),
	}
	size := fmt.Sprintf("%s windows", s.length)
	if s.percent != nil {
		size = fmt.Sprintf("%g%% of the pods", *s.percent)
	}
	mc.Logf("churn: %s %s %.0f pods/s, %s (achieved %.1f): %d changes, %d samples, lost %d (late %d, unseen %d, wrong final state %d), superseded %d; "+
		"p50 %s p90 %s p99 %s max %s ms; istiod %.4f cores (%s, resolution %.1g), %s pushes/s %v, %s xDS clients, rss %.0f MB, live heap %.0f MB",
		s.where, s.mode, s.rate, size, run.AchievedPodsPerSecond, run.Changes, sum.Samples, sum.Lost, sum.Late, sum.Unseen, sum.Mismatched, sum.Superseded,
		fmt1(run.P50Ms), fmt1(run.P90Ms), fmt1(run.P99Ms), fmt1(run.MaxMs), cost.CPUCores, cost.CPUSource, cost.ResolutionCores,
		fmt1(cost.PushesPerSecond), roundMap(cost.ByType), fmt1(cost.ConnectedXDS), settled.RSSBytes/1e6, settled.LiveHeapBytes/1e6)
	if churned.Late > 0 || churned.Dropped > 0 {
		mc.Logf("churn: %s %s %.0f pods/s: %d changes started late and %d due ones dropped at the window's end (every target had a change in flight)", s.where, s.mode, s.rate, churned.Late, churned.Dropped)
	}
	assert.True(t, drained || sum.Unseen > 0, "drain ended with changes in flight but none unseen")
	assert.Zero(t, sum.Lost, "lost changes: %d late (over %s), %d never seen, %d keys in a wrong final state (first: %v)",
		sum.Late, limit, sum.Unseen, sum.Mismatched, firstN(mismatched, truth, 5))
	assert.Positive(t, sum.Samples, "the window made no change")

	if s.mode == churn.Ready {
		restoreReady(t, ctx, w, targets, limit)
	}
	return run
}

// restoreReady makes every churned pod Ready again (unmeasured) and waits for the watcher to agree.
func restoreReady(t *testing.T, ctx context.Context, w *xdswatch.Watcher, targets []*churn.Pods, limit time.Duration) {
	for _, p := range targets {
		_, err := p.RestoreReady(ctx)
		require.NoError(t, err)
	}
	waitTargetsHold(t, ctx, w, targets, limit, "pods Ready again at the watcher")
}

// restorePods puts every churned cluster's scale pods back as the test found them (names,
// addresses, nodes, readiness) and waits for the watcher to agree, so that what a later test
// measures does not depend on whether churn ran first.
func restorePods(t *testing.T, ctx context.Context, w *xdswatch.Watcher, targets []*churn.Pods, limit time.Duration) {
	// One cluster after another took 14 s for 235 pods at 10 clusters; each its own API server.
	var recreated atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range targets {
		g.Go(func() error {
			n, err := p.Restore(gctx)
			recreated.Add(int64(n))
			return err
		})
	}
	require.NoError(t, g.Wait(), "restoring the churned pods")
	waitTargetsHold(t, ctx, w, targets, limit, "the restored pods at the watcher")
	mc.Logf("churn: %d replaced pods put back as they were", recreated.Load())
}

// waitTargetsHold waits until the watcher shows every target's pods as the API has them.
func waitTargetsHold(t *testing.T, ctx context.Context, w *xdswatch.Watcher, targets []*churn.Pods, limit time.Duration, what string) {
	truth := map[string]string{}
	for _, p := range targets {
		tt, err := p.Truth(ctx)
		require.NoError(t, err)
		maps.Copy(truth, tt)
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	require.NoError(t, w.WaitFor(wctx, func(w *xdswatch.Watcher) bool { return holds(w, truth) }), what)
}

func holds(w *xdswatch.Watcher, truth map[string]string) bool {
	addrs := w.Addresses()
	for k, v := range truth {
		if churn.StateOf(k, addrs[k]) != v {
			return false
		}
	}
	return true
}

// remoteUnreadyFinding turns one, then every endpoint of a remote service unready and records the
// capacity the observed istiod sends for it. The pinned source counts every workload of the
// service on the network, Ready or not (pilot/pkg/serviceregistry/ambient/multicluster.go
// 342-348); each reading is fenced by a capacity change of another service in the same cluster,
// which istiod sees after the flips.
func remoteUnreadyFinding(t *testing.T, ctx context.Context, w *xdswatch.Watcher, obsName string, c *cluster.Cluster, p *churn.Pods, limit time.Duration) *report.ChurnFinding {
	t.Helper()
	if mc.scale.Services < 2 {
		t.Logf("churn: remote readiness finding needs two services (one to fence with); skipped")
		return nil
	}
	keys, err := splitHorizonKeys(w, c)
	require.NoError(t, err)
	key, fenceKey := keys[0], keys[1]
	n, nFence := p.Count(0), p.Count(1)
	capacity := func() int {
		v, _ := strconv.Atoi(strings.TrimPrefix(churn.StateOf(key, w.Addresses()[key]), "capacity="))
		return v
	}
	waitState := func(k, want string) {
		wctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		require.NoError(t, w.WaitFor(wctx, func(w *xdswatch.Watcher) bool { return churn.StateOf(k, w.Addresses()[k]) == want }),
			"watcher: %s to reach %s (has %s)", k, want, churn.StateOf(k, w.Addresses()[k]))
	}
	// fence adds (or removes) a pod of the other service and waits for its capacity to show.
	var fences []*churn.Pod
	fence := func() {
		pd, err := p.AddPod(ctx, 1)
		require.NoError(t, err)
		fences = append(fences, pd)
		waitState(fenceKey, churn.Capacity(nFence+len(fences)))
	}
	before := capacity()
	var flipped []*churn.Pod
	for i := range n {
		flipped = append(flipped, p.PodAt(0, i))
	}
	require.NoError(t, p.SetPodReady(ctx, flipped[0], false))
	fence()
	one := capacity()
	for _, pd := range flipped[1:] {
		require.NoError(t, p.SetPodReady(ctx, pd, false))
	}
	fence()
	all := capacity()
	sh := w.Addresses()[key].GetWorkload()
	status := sh.GetStatus().String()

	// Put everything back and wait for the watcher to agree.
	for _, pd := range flipped {
		require.NoError(t, p.SetPodReady(ctx, pd, true))
	}
	for _, pd := range fences {
		require.NoError(t, p.RemovePod(ctx, pd))
	}
	waitState(fenceKey, churn.Capacity(nFence))
	waitState(key, churn.Capacity(n))

	f := &report.ChurnFinding{
		Cluster: c.Name, Service: workload.ServiceName(0), Endpoints: n,
		CapacityBefore: before, CapacityWithOneUnready: one, CapacityWithAllUnready: all,
		UnreadyCountedInCapacity: one == n && all == n,
	}
	if f.UnreadyCountedInCapacity {
		f.Detail = fmt.Sprintf("Unready remote endpoints stay in the split-horizon capacity, as the pinned source reads (multicluster.go:342-348): "+
			"with 1 of %d endpoints of %s in %s unready, istiod %s still sends capacity %d; with all %d unready, still %d (workload status %s). "+
			"A ztunnel in another cluster keeps weighting %s's network by endpoints that cannot serve, and keeps sending to its gateway when none can.",
			n, f.Service, c.Name, obsName, one, n, all, status, c.Name)
	} else {
		f.Detail = fmt.Sprintf("Unready remote endpoints leave the split-horizon capacity: with 1 of %d endpoints of %s in %s unready the capacity was %d, "+
			"with all unready %d (workload status %s), unlike the pinned source's reading of multicluster.go:342-348.", n, f.Service, c.Name, one, all, status)
	}
	mc.Logf("churn: finding: %s", f.Detail)
	return f
}

// splitHorizonKeys finds, for every scale service, the watcher key of c's split-horizon workload.
func splitHorizonKeys(w *xdswatch.Watcher, c *cluster.Cluster) (map[int]string, error) {
	addrs := w.Addresses()
	keys := map[int]string{}
	for n := range mc.scale.Services {
		ns := mc.scale.ServiceNamespace(n)
		svc := ns + "/" + workload.ServiceName(n) + "." + ns + ".svc.cluster.local"
		k, ok := churn.SplitHorizonKey(addrs, c.Network, svc)
		if !ok {
			return nil, fmt.Errorf("the watcher holds no split-horizon workload of %s for %s", svc, c.Network)
		}
		keys[n] = k
	}
	return keys, nil
}

// knees finds, per case, mode and window size, the lowest rate whose p50 is over twice the p50 at
// the lowest rate.
func knees(runs []report.ChurnRun) []report.ChurnKnee {
	type group struct {
		where, mode string
		pct         float64
	}
	p50s := map[group]map[float64]time.Duration{}
	var order []group
	for _, r := range runs {
		if r.P50Ms == nil {
			continue
		}
		g := group{r.Where, r.Mode, -1}
		if r.PercentOfPods != nil {
			g.pct = *r.PercentOfPods
		}
		if p50s[g] == nil {
			p50s[g] = map[float64]time.Duration{}
			order = append(order, g)
		}
		p50s[g][r.RatePodsPerSecond] = time.Duration(*r.P50Ms * float64(time.Millisecond))
	}
	var out []report.ChurnKnee
	for _, g := range order {
		if len(p50s[g]) < 2 {
			continue
		}
		base := slices.Min(slices.Collect(mapKeys(p50s[g])))
		k := report.ChurnKnee{Where: g.where, Mode: g.mode, BaseRate: base, BaseP50Ms: ms(p50s[g][base])}
		if g.pct >= 0 {
			k.PercentOfPods = report.F(g.pct)
		}
		if rate, ok := churn.Knee(p50s[g]); ok {
			k.RatePodsPerSecond = report.F(rate)
		}
		out = append(out, k)
	}
	return out
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func percentsOrNone(ps []float64) []*float64 {
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

func msp(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	return report.F(ms(*d))
}

func fmt1(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

func roundMap(m map[string]float64) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = strconv.FormatFloat(v, 'f', 1, 64)
	}
	return out
}

// firstN lists up to n keys whose watcher state differs from the truth, for failure messages.
func firstN(got, truth map[string]string, n int) []string {
	keys := slices.Sorted(mapKeys(got))
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%s: watcher %q, API %q", k, got[k], truth[k]))
	}
	return out
}

// churnableRemotes are the remote clusters churn can track: every one on the observed cluster's
// network (their pods show one by one) and, on another network, the first cluster of each; the
// rest of a shared remote network stay out of the mesh while churn runs (coalesced).
func churnableRemotes(obs *cluster.Cluster) (remotes, coalesced []*cluster.Cluster) {
	seen := map[string]bool{}
	for _, name := range everyCluster()[1:] {
		c := mc.Cluster(name)
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
