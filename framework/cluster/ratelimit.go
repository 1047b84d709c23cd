package cluster

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// ClientWaits counts how long the framework's client-side rate limiter held requests back, so a
// report can say whether workload creation was limited by the API servers or by the client.
type ClientWaits struct {
	waits   atomic.Int64
	waitedN atomic.Int64 // nanoseconds
}

// Waited returns how many requests waited (over a millisecond) and for how long in total.
func (w *ClientWaits) Waited() (requests int64, total time.Duration) {
	return w.waits.Load(), time.Duration(w.waitedN.Load())
}

// countingLimiter is client-go's token bucket, timing every wait.
type countingLimiter struct {
	flowcontrol.RateLimiter
	w *ClientWaits
}

func (l countingLimiter) Wait(ctx context.Context) error {
	defer l.w.since(time.Now())
	return l.RateLimiter.Wait(ctx)
}

func (l countingLimiter) Accept() {
	defer l.w.since(time.Now())
	l.RateLimiter.Accept()
}

// since counts a wait that began at start, if it held the request back for over a millisecond.
func (w *ClientWaits) since(start time.Time) {
	if d := time.Since(start); d > time.Millisecond {
		w.waits.Add(1)
		w.waitedN.Add(int64(d))
	}
}
