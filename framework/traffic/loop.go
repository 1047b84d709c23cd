// Package traffic sends requests through the mesh at a steady interval while something changes
// under it (a failover, a rotation, a restart), and sums up who answered.
package traffic

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/report"
)

// Requester sends one request to app on a new connection and says which cluster served it
// (probe.Env).
type Requester interface {
	Request(ctx context.Context, app string) (servedBy string, err error)
}

// Loop sends one request every interval on a fresh connection and records who served it.
type Loop struct {
	interval time.Duration
	mu       sync.Mutex
	answers  []Answer
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// Answer is one request's outcome: when it was answered and by which cluster ("" if it failed,
// with Err saying why).
type Answer struct {
	At       time.Time
	ServedBy string
	Err      string
}

// Start begins requests to app through r, one every interval, until Stop or ctx ends.
func Start(ctx context.Context, r Requester, app string, interval time.Duration) *Loop {
	l := &Loop{interval: interval, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			a := Answer{}
			by, err := r.Request(ctx, app)
			if err != nil {
				a.Err = err.Error()
			} else {
				a.ServedBy = by
			}
			a.At = time.Now()
			l.add(a)
		}
	}()
	return l
}

func (l *Loop) add(a Answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, a)
}

// Interval is the time between two requests.
func (l *Loop) Interval() time.Duration { return l.interval }

// Stop ends the loop and waits for its last request; it may be called again.
func (l *Loop) Stop() { l.stopOnce.Do(func() { close(l.stop) }); <-l.done }

// Since returns the answers received after t.
func (l *Loop) Since(t time.Time) []Answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Answer
	for _, a := range l.answers {
		if a.At.After(t) {
			out = append(out, a)
		}
	}
	return out
}

// FirstServedBy waits until a request answered after from was served by cluster and returns how
// long after from that answer came.
func (l *Loop) FirstServedBy(ctx context.Context, cluster string, from time.Time, timeout time.Duration) (time.Duration, error) {
	for time.Since(from) < timeout && ctx.Err() == nil {
		for _, a := range l.Since(from) {
			if a.ServedBy == cluster {
				return a.At.Sub(from), nil
			}
		}
		time.Sleep(l.interval)
	}
	return 0, fmt.Errorf("no request was served by %s within %s", cluster, timeout)
}

// Count tallies answers by who served them; "" counts failures.
func Count(as []Answer) map[string]int64 {
	m := map[string]int64{}
	for _, a := range as {
		m[a.ServedBy]++
	}
	return m
}

// Figures turns the loop's answers since from into the report's figures: every answer must have
// come from cluster want.
func (l *Loop) Figures(from time.Time, want string) *report.TrafficFigures {
	as := l.Since(from)
	f := &report.TrafficFigures{IntervalSeconds: l.interval.Seconds(), Requests: len(as)}
	last := from
	for _, a := range as {
		if a.ServedBy == want {
			f.Succeeded++
			f.LongestGapSeconds = max(f.LongestGapSeconds, a.At.Sub(last).Seconds())
			last = a.At
			continue
		}
		if len(f.Failures) < maxFailures {
			why := a.Err
			if why == "" {
				why = "served by " + a.ServedBy
			}
			f.Failures = append(f.Failures, fmt.Sprintf("+%.1fs: %s", a.At.Sub(from).Seconds(), why))
		}
	}
	if len(as) > 0 {
		f.LongestGapSeconds = max(f.LongestGapSeconds, as[len(as)-1].At.Sub(last).Seconds())
	}
	return f
}

// maxFailures bounds the failed requests Figures describes.
const maxFailures = 3

// Text sums up traffic figures for a check's detail.
func Text(f *report.TrafficFigures) string {
	text := fmt.Sprintf("%d of %d requests (one every %s) succeeded, longest gap between successes %.1fs",
		f.Succeeded, f.Requests, time.Duration(f.IntervalSeconds*float64(time.Second)), f.LongestGapSeconds)
	if len(f.Failures) > 0 {
		text += " (failed: " + strings.Join(f.Failures, "; ") + ")"
	}
	return text
}
