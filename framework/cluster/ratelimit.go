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
	start := time.Now()
	err := l.RateLimiter.Wait(ctx)
	if d := time.Since(start); d > time.Millisecond {
		l.w.waits.Add(1)
		l.w.waitedN.Add(int64(d))
	}
	return err
}

func (l countingLimiter) Accept() {
	start := time.Now()
	l.RateLimiter.Accept()
	if d := time.Since(start); d > time.Millisecond {
		l.w.waits.Add(1)
		l.w.waitedN.Add(int64(d))
	}
}
