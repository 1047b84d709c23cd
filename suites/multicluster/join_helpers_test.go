package multicluster

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"github.com/ambientmc/ambientmc/topology"
)

// sampleInterval spaces the memory samples of one step.
const sampleInterval = 250 * time.Millisecond

// settleCap is the longest a step waits after convergence before it samples istiod: bigger
// clusters keep istiod busy for longer.
func settleCap() time.Duration {
	switch {
	case mc.scale.Pods <= 500:
		return 6 * time.Second
	case mc.scale.Pods <= 2000:
		return 20 * time.Second
	default:
		return 30 * time.Second
	}
}

// The adaptive settle: istiod's CPU read in quietTick ticks; a step has settled when a steady
// window's worth of ticks in a row stayed in the idle band. The steady window is as long as the
// CPU source's resolution needs to resolve steadyTarget cores (at least minSteady).
const (
	quietTick    = 250 * time.Millisecond
	steadyTarget = 0.001
	minSteady    = 2 * time.Second
	// provisionalLimit is the quiet limit before the idle band is known (the baseline waits for
	// istiod's own start-up work to end under it).
	provisionalLimit = 0.03
)

// settler is how a step (the baseline, a join) waits before it samples istiod and reads its steady
// CPU: after fixed windows (-join.settle, -join.steady), or until istiod's CPU is back in its band.
type settler struct {
	fixed          bool
	settle, steady time.Duration // fixed
	band           measure.CPUBand
	ticks          int // adaptive: quiet ticks in a row, the steady window
	limit          time.Duration
}

func newSettler(i cluster.Istiod) *settler {
	j := mc.opts.Join
	if j.Settle > 0 || j.Steady > 0 {
		s := &settler{fixed: true, settle: settleCap(), steady: min(4*time.Second, settleCap())}
		if j.Settle > 0 {
			s.settle = j.Settle
		}
		if j.Steady > 0 {
			s.steady = j.Steady
		}
		s.steady = min(s.steady, s.settle)
		return s
	}
	window := measure.SteadyWindow(i.Sampler().CPUSource().Resolution(), steadyTarget, minSteady)
	ticks := int(math.Ceil(float64(window) / float64(quietTick)))
	// As the idle band's, the provisional limit stays above what one tick resolves: an in-cluster
	// istiod's process_cpu_seconds_total counts in 10 ms, 0.04 cores over one tick.
	limit := max(provisionalLimit, 2*i.Sampler().CPUSource().Resolution()/quietTick.Seconds())
	return &settler{ticks: ticks, limit: settleCap() + window, band: measure.CPUBand{Tick: quietTick, Limit: limit}}
}

// rule says in the report how steps settled.
func (s *settler) rule() string {
	if s.fixed {
		return fmt.Sprintf("fixed: %s after convergence, steady CPU over the %s before that (-join.settle, -join.steady)", s.settle, s.steady)
	}
	return fmt.Sprintf("until istiod's CPU stayed under %.4f cores (its idle maximum + %.2f) for %d ticks of %s in a row, the steady window; at most %s",
		s.band.Limit, s.band.Limit-s.band.Max, s.ticks, quietTick, s.limit)
}

// steadyWindow is the length of the steady-CPU window.
func (s *settler) steadyWindow() time.Duration {
	if s.fixed {
		return s.steady
	}
	return time.Duration(s.ticks) * quietTick
}

// stepSample is what one step (baseline or join) measured.
type stepSample struct {
	measure.Settled
	blended, steady measure.CPUSpan
	settledAfter    time.Duration
	capped          bool
}

// baseline waits for the idle istiod to be quiet, learns its idle band from the steady window
// (adaptive), then samples it.
func (s *settler) baseline(ctx context.Context, t *testing.T, i cluster.Istiod) stepSample {
	t.Helper()
	from := readCPU(t, ctx, i)
	if s.fixed {
		return s.sampleAfter(ctx, t, i, from, time.Now(), nil)
	}
	q, err := i.Sampler().WaitQuiet(ctx, s.band, s.ticks, 3*s.limit)
	require.NoError(t, err)
	require.False(t, q.Capped, "istiod %s stayed above %.2f cores for %s after its start: it is not idle (rates %v)", i.Cluster(), s.band.Limit, 3*s.limit, q.Rates)
	s.band, err = i.Sampler().IdleBand(ctx, quietTick, s.ticks)
	require.NoError(t, err)
	return s.sample(ctx, t, i, from, stepSample{steady: spanOf(s.band.Mean, s.ticks, i)}, nil)
}

// after waits until the step that began at from and converged at convergedAt has settled, then
// samples istiod; beforeMemory, when set, runs between the CPU reading and the memory samples.
func (s *settler) after(ctx context.Context, t *testing.T, i cluster.Istiod, from measure.CPUReading, convergedAt time.Time, beforeMemory func()) stepSample {
	t.Helper()
	if s.fixed {
		return s.sampleAfter(ctx, t, i, from, convergedAt, beforeMemory)
	}
	q, err := i.Sampler().WaitQuiet(ctx, s.band, s.ticks, s.limit)
	require.NoError(t, err)
	last := q.Rates[max(0, len(q.Rates)-s.ticks):]
	var sum float64
	for _, r := range last {
		sum += r
	}
	st := stepSample{steady: spanOf(sum/float64(len(last)), len(last), i), settledAfter: time.Since(convergedAt), capped: q.Capped}
	return s.sample(ctx, t, i, from, st, beforeMemory)
}

// spanOf is a steady window of n ticks at rate cores, with the source's resolution.
func spanOf(rate float64, n int, i cluster.Istiod) measure.CPUSpan {
	wall := float64(n) * quietTick.Seconds()
	return measure.CPUSpan{CPUSeconds: rate * wall, WallSeconds: wall, Resolution: i.Sampler().CPUSource().Resolution()}
}

// sampleAfter is the fixed rule: the steady window ends settle after convergedAt.
func (s *settler) sampleAfter(ctx context.Context, t *testing.T, i cluster.Istiod, from measure.CPUReading, convergedAt time.Time, beforeMemory func()) stepSample {
	t.Helper()
	settleAt := convergedAt.Add(s.settle)
	sleepUntil(ctx, settleAt.Add(-s.steady))
	steadyStart := readCPU(t, ctx, i)
	sleepUntil(ctx, settleAt)
	end := readCPU(t, ctx, i)
	steady, err := measure.SpanBetween(steadyStart, end)
	require.NoError(t, err, "istiod %s steady CPU", i.Cluster())
	return s.sample(ctx, t, i, from, stepSample{steady: steady, settledAfter: time.Since(convergedAt)}, beforeMemory)
}

// sample reads the blended CPU from `from` to now, runs beforeMemory (if set), then takes the
// memory samples.
func (s *settler) sample(ctx context.Context, t *testing.T, i cluster.Istiod, from measure.CPUReading, st stepSample, beforeMemory func()) stepSample {
	t.Helper()
	end := readCPU(t, ctx, i)
	var err error
	st.blended, err = measure.SpanBetween(from, end)
	require.NoError(t, err, "istiod %s CPU", i.Cluster())
	if beforeMemory != nil {
		beforeMemory()
	}
	st.Settled, err = i.Sampler().Settled(ctx, mc.opts.Join.Samples, sampleInterval)
	require.NoError(t, err, "sampling istiod %s", i.Cluster())
	return st
}

// xdsClients is how many ztunnel-like clients the observed istiod serves during the joins: the
// flag, else 15 at published scale (as the harness behind the published figures connected 15
// fake ztunnels per cluster) and 1 below it.
func xdsClients() int {
	switch {
	case mc.opts.Join.XDSClients > 0:
		return mc.opts.Join.XDSClients
	case mc.scale.Pods >= 4000:
		return 15
	default:
		return 1
	}
}

// startWatcher connects a ztunnel-like xDS client to istiod, authenticated with a ztunnel
// certificate from the cluster's own CA; it closes when the test ends.
func startWatcher(t *testing.T, ctx context.Context, c *cluster.Cluster, i cluster.Istiod) *xdswatch.Watcher {
	t.Helper()
	cert, err := mc.mesh.Intermediates[c.Name].Issue(mesh.SystemNamespace, "ztunnel", 0)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "ztunnel-cert")
	require.NoError(t, cert.WriteDir(dir))
	ip, err := workload.InternalIP(context.Background(), c, workload.NodeName(0))
	require.NoError(t, err)
	w, err := xdswatch.Start(ctx, xdswatch.Config{
		Address: i.XDSAddress(), CertDir: dir, IP: ip.String(),
		Name: "ztunnel-watch", Node: "node-0", Cluster: c.Name,
	}, time.Minute)
	require.NoError(t, err, "ztunnel-like watcher on %s", i.XDSAddress())
	t.Cleanup(w.Close)
	if i != mc.mesh.Istiods[c.Name] {
		isolatedWatchers.Store(w, true)
	}
	return w
}

// isolatedWatchers are the watchers of the checks' isolated istiods, which hold only the remote
// cluster their check gave them, not the suite mesh's members.
var isolatedWatchers sync.Map

// onNetwork is how many clusters on c's network the watcher's istiod holds besides c: istiod
// coalesces a remote network's endpoints of a service into one split-horizon workload whose
// capacity sums every cluster on that network (ambient/multicluster.go, CoalesedWorkloads).
func onNetwork(w *xdswatch.Watcher, c *cluster.Cluster) int {
	if _, ok := isolatedWatchers.Load(w); ok {
		return 0
	}
	n := 0
	for _, name := range mc.mesh.Joined() {
		if o := mc.Cluster(name); name != c.Name && name != w.Cluster() && o.Network == c.Network {
			n++
		}
	}
	return n
}

// networkGateways are the east-west gateway addresses of the clusters on network: istiod sends
// the first it finds for the whole network (istio/istio#56960).
func networkGateways(network string) map[string]bool {
	gws := map[string]bool{}
	for _, o := range mc.Clusters {
		if o.Network == network {
			gws[mc.mesh.GatewayAddress(o.Name)] = true
		}
	}
	return gws
}

// relationTo is how the watcher's cluster reaches c: the join criterion and the data path follow it.
func relationTo(w *xdswatch.Watcher, c *cluster.Cluster) topology.Relation {
	return topology.RelationOf(mc.Cluster(w.Cluster()).Cluster, c.Cluster)
}

// criterion names in the report what a join of c waits for on a client of from's istiod.
func criterion(from, c *cluster.Cluster) string {
	if topology.RelationOf(from.Cluster, c.Cluster) == topology.SameNetwork {
		return report.CriterionPodWorkloads
	}
	return report.CriterionSplitHorizon
}

// holdsCluster says whether the watcher has everything a ztunnel needs to reach c's scale pods,
// and nothing more: for a cluster on another network one split-horizon workload per global
// service, capacities summing to the pods of c and of every other held cluster on its network, via
// one of that network's gateways; for one on the watcher's own network
// every scale pod as a workload with its own address, reached directly.
func holdsCluster(c *cluster.Cluster) func(*xdswatch.Watcher) bool { return reaches(c, true) }

// coversCluster is holdsCluster allowing more: the probe services the data-plane suites add.
func coversCluster(c *cluster.Cluster) func(*xdswatch.Watcher) bool { return reaches(c, false) }

// reaches counts the scale services only and wants their counts exactly when exact, else counts
// every service and wants at least the scale's.
func reaches(c *cluster.Cluster, exact bool) func(*xdswatch.Watcher) bool {
	gws := networkGateways(c.Network)
	keep := isScaleService
	enough := func(have, want int) bool { return have == want }
	if !exact {
		keep, enough = nil, func(have, want int) bool { return have >= want }
	}
	return func(w *xdswatch.Watcher) bool {
		if relationTo(w, c) == topology.SameNetwork {
			return enough(w.PodWorkloads(c.Name, keep), mc.scale.Pods)
		}
		sh := w.SplitHorizonOf(c.Network, keep)
		// Through the network's gateways only; with several on it istiod may pick another one
		// per service.
		via := len(sh.Gateways) > 0
		for gw := range sh.Gateways {
			via = via && gws[gw]
		}
		return enough(sh.Workloads, mc.scale.Services) && enough(int(sh.Capacity), mc.scale.Pods*(1+onNetwork(w, c))) && via
	}
}

// heldOf describes what the watcher holds of c, for failure messages.
func heldOf(w *xdswatch.Watcher, c *cluster.Cluster) string {
	if relationTo(w, c) == topology.SameNetwork {
		return fmt.Sprintf("%d of %d pod workloads of %s (same network)", w.PodWorkloads(c.Name, isScaleService), mc.scale.Pods, c.Name)
	}
	sh := w.SplitHorizonOf(c.Network, isScaleService)
	return fmt.Sprintf("%d split-horizon workloads (capacity %d) for %s, want %d (capacity %d)",
		sh.Workloads, sh.Capacity, c.Network, mc.scale.Services, mc.scale.Pods*(1+onNetwork(w, c)))
}

// isScaleService keeps the scale workloads' services (not the probe services the data-plane
// suites add), by their "ns/hostname" key.
func isScaleService(key string) bool { return !strings.HasPrefix(key, workload.ProbeNamespace+"/") }

// waitHolds waits until the watcher holds every named cluster.
func waitHolds(t *testing.T, ctx context.Context, w *xdswatch.Watcher, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, mc.opts.Join.Timeout)
	defer cancel()
	for _, name := range names {
		c := mc.Cluster(name)
		require.NoError(t, w.WaitFor(ctx, holdsCluster(c)), "watcher holds %s: has %s", name, heldOf(w, c))
	}
}

// lacksCluster says whether the watcher no longer holds anything of c's pods.
func lacksCluster(c *cluster.Cluster) func(*xdswatch.Watcher) bool {
	return func(w *xdswatch.Watcher) bool {
		if relationTo(w, c) == topology.SameNetwork {
			return w.PodWorkloads(c.Name, nil) == 0
		}
		if others := onNetwork(w, c); others > 0 {
			// The network stays: its capacity falls back to the clusters left on it.
			return int(w.SplitHorizonOf(c.Network, isScaleService).Capacity) == mc.scale.Pods*others
		}
		return w.SplitHorizonFor(c.Network).Workloads == 0
	}
}

// convergence is how long a join took to show, measured from the moment its secrets were written.
type convergence struct {
	Sync, XDS, Total time.Duration
}

// whileAlive derives a context that ends when istiod dies, so waits fail at once with the reason.
func whileAlive(ctx context.Context, i cluster.Istiod, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	ctx, cancel := context.WithCancelCause(ctx)
	done := i.Done()
	go func() {
		select {
		case <-done:
			cancel(fmt.Errorf("istiod %s exited: %v", i.Cluster(), i.ExitErr()))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil); cancelTimeout() }
}

// failure wraps a wait error with the cluster it was about and istiod's log tail.
func failure(i cluster.Istiod, what string, timeout time.Duration, ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != err {
		err = fmt.Errorf("%w (%v)", err, cause)
	}
	return fmt.Errorf("%s did not happen within -join.timeout=%s: %w\n--- last 40 lines of %s ---\n%s",
		what, timeout, err, i.LogFile(), i.Tail(40))
}

// waitJoined waits until istiod reports c synced and the watcher holds c's network.
func waitJoined(ctx context.Context, i cluster.Istiod, w *xdswatch.Watcher, c *cluster.Cluster, start time.Time, timeout time.Duration) (convergence, error) {
	ctx, cancel := whileAlive(ctx, i, timeout)
	defer cancel()
	var conv convergence
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if _, err := i.Sampler().WaitRemoteSynced(gctx, c.Name, 50*time.Millisecond); err != nil {
			return err
		}
		conv.Sync = time.Since(start)
		return nil
	})
	if w != nil {
		g.Go(func() error {
			if err := w.WaitFor(gctx, holdsCluster(c)); err != nil {
				return fmt.Errorf("xDS: have %s: %w", heldOf(w, c), err)
			}
			conv.XDS = time.Since(start)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return conv, failure(i, fmt.Sprintf("join of %s (istiod %s)", c.Name, i.Cluster()), timeout, ctx, err)
	}
	conv.Total = max(conv.Sync, conv.XDS)
	return conv, nil
}

// joinAndWait joins c to the mesh and waits for the observed istiod to converge on it.
func joinAndWait(t *testing.T, ctx context.Context, i cluster.Istiod, w *xdswatch.Watcher, c *cluster.Cluster) (convergence, time.Time) {
	t.Helper()
	start := time.Now()
	require.NoError(t, mc.mesh.Join(ctx, c.Name))
	conv, err := waitJoined(ctx, i, w, c, start, mc.opts.Join.Timeout)
	require.NoError(t, err)
	return conv, start
}

// waitLeft waits until istiod no longer manages c and, with a watcher, until the watcher holds
// nothing of c's network.
func waitLeft(ctx context.Context, i cluster.Istiod, w *xdswatch.Watcher, c *cluster.Cluster, timeout time.Duration) error {
	ctx, cancel := whileAlive(ctx, i, timeout)
	defer cancel()
	_, err := i.Sampler().WaitRemoteGone(ctx, c.Name, 50*time.Millisecond)
	if err == nil && w != nil {
		err = w.WaitFor(ctx, lacksCluster(c))
	}
	if err != nil {
		return failure(i, "leave of "+c.Name, timeout, ctx, err)
	}
	return nil
}

// sleepUntil waits until t, or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// readCPU reads istiod's CPU time from its CPU source or fails the test naming it.
func readCPU(t *testing.T, ctx context.Context, i cluster.Istiod) measure.CPUReading {
	t.Helper()
	r, err := i.Sampler().ReadCPU(ctx)
	require.NoError(t, err, "reading istiod %s CPU", i.Cluster())
	return r
}

// scrape reads istiod's metrics or fails the test naming it.
func scrape(t *testing.T, ctx context.Context, i cluster.Istiod) *measure.Metrics {
	t.Helper()
	m, err := i.Sampler().Scrape(ctx)
	require.NoError(t, err, "scraping istiod %s", i.Cluster())
	return m
}
