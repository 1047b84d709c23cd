package join

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// Convergence is how long a join took to show, measured from the moment its secrets were written.
type Convergence struct {
	Sync, XDS, Total time.Duration
}

// WhileAlive derives a context that ends when istiod dies, so waits fail at once with the reason.
func WhileAlive(ctx context.Context, i *mesh.Istiod, timeout time.Duration) (context.Context, context.CancelFunc) {
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
func failure(ctx context.Context, i *mesh.Istiod, what string, timeout time.Duration, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != err {
		err = fmt.Errorf("%w (%v)", err, cause)
	}
	return fmt.Errorf("%s did not happen within -join.timeout=%s: %w\n--- last 40 lines of %s ---\n%s",
		what, timeout, err, i.LogFile(), i.Tail(40))
}

// WaitJoined waits until istiod reports c synced and, with a watcher, until the watcher holds c
// as e says.
func (e Expect) WaitJoined(ctx context.Context, i *mesh.Istiod, w *xdswatch.Watcher, c *cluster.Cluster, start time.Time, timeout time.Duration) (Convergence, error) {
	ctx, cancel := WhileAlive(ctx, i, timeout)
	defer cancel()
	var conv Convergence
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
			if err := w.WaitFor(gctx, e.Holds(c)); err != nil {
				return fmt.Errorf("xDS: have %s: %w", e.HeldOf(w, c), err)
			}
			conv.XDS = time.Since(start)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return conv, failure(ctx, i, fmt.Sprintf("join of %s (istiod %s)", c.Name, i.Cluster()), timeout, err)
	}
	conv.Total = max(conv.Sync, conv.XDS)
	return conv, nil
}

// WaitLeft waits until istiod no longer manages c and, with a watcher, until the watcher holds
// nothing of c's network.
func (e Expect) WaitLeft(ctx context.Context, i *mesh.Istiod, w *xdswatch.Watcher, c *cluster.Cluster, timeout time.Duration) error {
	ctx, cancel := WhileAlive(ctx, i, timeout)
	defer cancel()
	_, err := i.Sampler().WaitRemoteGone(ctx, c.Name, 50*time.Millisecond)
	if err == nil && w != nil {
		err = w.WaitFor(ctx, e.Lacks(c))
	}
	if err != nil {
		return failure(ctx, i, "leave of "+c.Name, timeout, err)
	}
	return nil
}

// WaitHolds waits until the watcher holds every cluster of cs.
func (e Expect) WaitHolds(ctx context.Context, w *xdswatch.Watcher, timeout time.Duration, cs ...*cluster.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, c := range cs {
		if err := w.WaitFor(ctx, e.Holds(c)); err != nil {
			return fmt.Errorf("watcher holds %s: has %s: %w", c.Name, e.HeldOf(w, c), err)
		}
	}
	return nil
}

// SleepUntil waits until t, or until ctx ends.
func SleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// WaitUntil polls cond every 50 ms until it holds or timeout passes.
func WaitUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// WaitStatus polls until istiod reports cluster id in status st, returning the time it took and
// the last scrape.
func WaitStatus(ctx context.Context, i *mesh.Istiod, id, st string, timeout time.Duration) (time.Duration, *measure.Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var last *measure.Metrics
	for {
		m, err := i.Sampler().Scrape(ctx)
		if err == nil {
			last = m
			if m.RemoteStatus[id] == st {
				return time.Since(start), m, nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Since(start), last, fmt.Errorf("istiod %s: cluster %s not %s within %s (status %q)", i.Cluster(), id, st, timeout, StatusOf(last, id))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StatusOf is what a scrape says of cluster id's sync: its status, "gone" once istiod finished
// deleting it, "never seen", or "no scrape".
func StatusOf(m *measure.Metrics, id string) string {
	if m == nil {
		return "no scrape"
	}
	st, ok := m.RemoteStatus[id]
	switch {
	case !ok:
		return "never seen"
	case st == "":
		return StatusGone // every status series at 0: istiod finished deleting it
	}
	return st
}
