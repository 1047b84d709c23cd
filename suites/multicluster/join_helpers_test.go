package multicluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// windows returns how long to wait after convergence before sampling, and the steady-CPU window
// that ends there. They scale with the workload: bigger clusters keep istiod busy for longer.
func windows() (settle, steady time.Duration) {
	switch {
	case scale.Pods <= 500:
		settle, steady = 6*time.Second, 4*time.Second
	case scale.Pods <= 2000:
		settle, steady = 20*time.Second, 15*time.Second
	default:
		settle, steady = 30*time.Second, 20*time.Second
	}
	if mc.Flags.JoinSettle > 0 {
		settle = mc.Flags.JoinSettle
	}
	if mc.Flags.JoinSteady > 0 {
		steady = mc.Flags.JoinSteady
	}
	if steady > settle {
		steady = settle
	}
	return settle, steady
}

// xdsClients is how many ztunnel-like clients the observed istiod serves during the joins: the
// flag, else 15 at published scale (as the harness behind the published figures connected 15
// fake ztunnels per cluster) and 1 below it.
func xdsClients() int {
	switch {
	case mc.Flags.XDSClients > 0:
		return mc.Flags.XDSClients
	case scale.Pods >= 4000:
		return 15
	default:
		return 1
	}
}

// observedIstiod returns the measured cluster and its istiod.
func observedIstiod(t *testing.T) (*cluster.Cluster, cluster.Istiod) {
	t.Helper()
	c, err := observed(mc)
	require.NoError(t, err)
	i := ambient.Istiods[c.Name]
	require.NotNil(t, i, "no istiod runs for %s", c.Name)
	return c, i
}

// startWatcher connects a ztunnel-like xDS client to istiod, authenticated with a ztunnel
// certificate from the cluster's own CA.
func startWatcher(t *testing.T, c *cluster.Cluster, i cluster.Istiod) *xdswatch.Watcher {
	t.Helper()
	cert, err := ambient.Intermediates[c.Name].Issue(mesh.SystemNamespace, "ztunnel", 0)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "ztunnel-cert")
	require.NoError(t, cert.WriteDir(dir))
	ip, err := workload.InternalIP(context.Background(), c, workload.NodeName(0))
	require.NoError(t, err)
	w, err := xdswatch.Start(context.Background(), xdswatch.Config{
		Address: i.XDSAddress(), CertDir: dir, IP: ip.String(),
		Name: "ztunnel-watch", Node: "node-0", Cluster: c.Name,
	}, time.Minute)
	require.NoError(t, err, "ztunnel-like watcher on %s", i.XDSAddress())
	t.Cleanup(w.Close)
	return w
}

// holdsNetwork says whether the watcher has everything a ztunnel needs to reach c's network: one
// split-horizon workload per global service, capacities summing to c's pods, via c's gateway.
func holdsNetwork(c *cluster.Cluster) func(*xdswatch.Watcher) bool {
	gw := ambient.GatewayAddress(c.Name)
	return func(w *xdswatch.Watcher) bool {
		sh := w.SplitHorizonOf(c.Network, isScaleService)
		return sh.Workloads == scale.Services && sh.Capacity == uint64(scale.Pods) && sh.Gateways[gw] && len(sh.Gateways) == 1
	}
}

// isScaleService keeps the scale workloads' services (not the probe services the data-plane
// suites add), by their "ns/hostname" key.
func isScaleService(key string) bool { return !strings.HasPrefix(key, workload.ProbeNamespace+"/") }

// lacksNetwork says whether the watcher no longer holds anything of c's network.
func lacksNetwork(c *cluster.Cluster) func(*xdswatch.Watcher) bool {
	return func(w *xdswatch.Watcher) bool { return w.SplitHorizonFor(c.Network).Workloads == 0 }
}

// convergence is how long a join took to show, measured from the moment its secrets were written.
type convergence struct {
	Sync, XDS, Total time.Duration
}

// whileAlive derives a context that ends when istiod dies, so waits fail at once with the reason.
func whileAlive(ctx context.Context, i cluster.Istiod, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-i.Done():
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
			if err := w.WaitFor(gctx, holdsNetwork(c)); err != nil {
				sh := w.SplitHorizonOf(c.Network, isScaleService)
				return fmt.Errorf("xDS: have %d split-horizon workloads (capacity %d) for %s, want %d (capacity %d): %w",
					sh.Workloads, sh.Capacity, c.Network, scale.Services, scale.Pods, err)
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
func joinAndWait(t *testing.T, i cluster.Istiod, w *xdswatch.Watcher, c *cluster.Cluster) (convergence, time.Time) {
	t.Helper()
	start := time.Now()
	require.NoError(t, ambient.Join(context.Background(), c.Name))
	conv, err := waitJoined(context.Background(), i, w, c, start, mc.Flags.JoinTimeout)
	require.NoError(t, err)
	return conv, start
}

// leaveAll returns the mesh to no joined clusters, waiting for the observed istiod to let go.
func leaveAll(t *testing.T, i cluster.Istiod) {
	t.Helper()
	joined := ambient.Joined()
	for k := len(joined) - 1; k >= 0; k-- {
		require.NoError(t, ambient.Leave(context.Background(), joined[k]))
		if joined[k] != i.Cluster() {
			require.NoError(t, waitLeft(context.Background(), i, nil, mc.Cluster(joined[k]), mc.Flags.JoinTimeout))
		}
	}
}

// waitLeft waits until istiod no longer manages c and, with a watcher, until the watcher holds
// nothing of c's network.
func waitLeft(ctx context.Context, i cluster.Istiod, w *xdswatch.Watcher, c *cluster.Cluster, timeout time.Duration) error {
	ctx, cancel := whileAlive(ctx, i, timeout)
	defer cancel()
	_, err := i.Sampler().WaitRemoteGone(ctx, c.Name, 50*time.Millisecond)
	if err == nil && w != nil {
		err = w.WaitFor(ctx, lacksNetwork(c))
	}
	if err != nil {
		return failure(i, "leave of "+c.Name, timeout, ctx, err)
	}
	return nil
}

// sleepUntil waits until t (or returns at once if it has passed).
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// readCPU reads istiod's CPU time from its CPU source or fails the test naming it.
func readCPU(t *testing.T, i cluster.Istiod) measure.CPUReading {
	t.Helper()
	r, err := i.Sampler().ReadCPU(context.Background())
	require.NoError(t, err, "reading istiod %s CPU", i.Cluster())
	return r
}

// scrape reads istiod's metrics or fails the test naming it.
func scrape(t *testing.T, i cluster.Istiod) *measure.Metrics {
	t.Helper()
	m, err := i.Sampler().Scrape(context.Background())
	require.NoError(t, err, "scraping istiod %s", i.Cluster())
	return m
}
