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

// Wait counts a wait only where the bucket had no token: timing every call would count a
// goroutine a busy host merely descheduled.
func (l countingLimiter) Wait(ctx context.Context) error {
	if l.RateLimiter.TryAccept() {
		return nil
	}
	defer l.w.since(time.Now())
	return l.RateLimiter.Wait(ctx)
}

func (l countingLimiter) Accept() {
	if l.RateLimiter.TryAccept() {
		return
	}
	defer l.w.since(time.Now())
	l.RateLimiter.Accept()
}

// since counts a wait for a token that began at start.
func (w *ClientWaits) since(start time.Time) {
	w.waits.Add(1)
	w.waitedN.Add(int64(time.Since(start)))
}
