package churn

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Window is one churn window: every target cluster changes at Rate pods per second, either for
// Duration of wall time or until it has made Count changes (Count > 0 wins). A timed window ends
// on time even when its targets fall behind: changes still due then are counted as Dropped, so a
// slow API server shortens the achieved rate instead of stretching the run.
type Window struct {
	Mode     string
	Rate     float64
	Duration time.Duration
	Count    int
}

// Churned is what a window did.
type Churned struct {
	// Changes is how many pods were changed (replaced or flipped) over all targets.
	Changes int
	// Elapsed runs from the first change's start to the last write's return.
	Elapsed time.Duration
	// Late counts changes that started more than one interval behind schedule, mostly because
	// every target had a change in flight.
	Late int
	// Dropped counts the changes a timed window had scheduled but did not start before it ended.
	Dropped int
}

// AchievedRate is the changes per second per target the window reached.
func (c Churned) AchievedRate(targets int) float64 {
	if c.Elapsed <= 0 || targets == 0 {
		return 0
	}
	return float64(c.Changes) / float64(targets) / c.Elapsed.Seconds()
}

// Run churns targets through w, all at once, tracking every write in tr. It stops at the first
// failed write: a churn the API refused is a fault, not a measurement.
func Run(ctx context.Context, tr *Tracker, w Window, targets ...*Pods) (Churned, error) {
	start := time.Now()
	var mu sync.Mutex
	out := Churned{}
	g, gctx := errgroup.WithContext(ctx)
	for _, t := range targets {
		pacer, err := NewPacer(start, w.Rate)
		if err != nil {
			return out, err
		}
		g.Go(func() error {
			n, err := churnOne(gctx, tr, w, t, pacer)
			mu.Lock()
			out.Changes += n
			out.Late += pacer.Late
			if w.Count <= 0 {
				out.Dropped += pacer.Due(start.Add(w.Duration)) - n
			}
			mu.Unlock()
			return err
		})
	}
	err := g.Wait()
	out.Elapsed = time.Since(start)
	return out, err
}

// churnOne paces one target's changes; each runs in its own goroutine so a remote change that
// waits for its first step to show does not hold up the schedule.
func churnOne(ctx context.Context, tr *Tracker, w Window, t *Pods, pacer *Pacer) (int, error) {
	// The window ends where Run counts what was due, from the pacer's start, not from when this
	// goroutine got to run (else a change past the schedule's end could start).
	end := pacer.start.Add(w.Duration)
	timed := w.Count <= 0
	g, gctx := errgroup.WithContext(ctx)
	for !timed && pacer.Count() < w.Count || timed && pacer.Next().Before(end) && time.Now().Before(end) {
		due := pacer.Next()
		if err := sleepUntil(gctx, due); err != nil {
			break
		}
		// Wait for a target without a change in flight; the schedule does not move.
		for {
			job, err := t.Next(tr, w.Mode)
			if err == nil {
				g.Go(func() error { return job(gctx) })
				break
			}
			if !errors.Is(err, errNoIdle) {
				return pacer.Count(), errors.Join(err, g.Wait())
			}
			if err := sleepUntil(gctx, time.Now().Add(5*time.Millisecond)); err != nil {
				return pacer.Count(), g.Wait()
			}
			if timed && !time.Now().Before(end) {
				return pacer.Count(), g.Wait()
			}
		}
		pacer.Started(time.Now())
	}
	return pacer.Count(), g.Wait()
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	return sleep(ctx, d)
}

// sleep waits d, or returns early with ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Drain waits until every tracked change is reflected, or limit has passed since the last write,
// and returns whether nothing is left in flight.
func Drain(ctx context.Context, tr *Tracker, limit time.Duration) bool {
	for tr.Pending() > 0 {
		if time.Since(tr.LastWrite()) > limit || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
