// Package xdsstream keeps one xDS stream to istiod at a time with Istio's adsc delta client: when
// a stream breaks it starts a new client after a backoff, as ztunnel and Envoy reconnect, so each
// stream's answer starts from nothing (adsc would reconnect by itself, keeping its tree).
package xdsstream

import (
	"context"
	"sync"
	"time"

	"istio.io/istio/pkg/adsc"
	"istio.io/istio/pkg/backoff"
)

// Reconnect backoff after a broken stream: exponential from reconnectFirst to reconnectMax.
const (
	reconnectFirst = 100 * time.Millisecond
	reconnectMax   = 5 * time.Second
)

// Hooks are what Run asks of its caller.
type Hooks struct {
	// New builds stream gen's client (gen counts from 1), with policy as its BackoffPolicy: the
	// policy ends the client when its stream breaks.
	New func(gen int, policy backoff.BackOff) *adsc.Client
	// Synced is called once stream gen has had its answer to every initial watch.
	Synced func(gen int)
}

// Run keeps a stream until ctx ends. It returns false at once when the first stream ended before
// its first answer (nothing would come of retrying a wrong address or certificate), else true
// once ctx has ended.
func Run(ctx context.Context, h Hooks) bool {
	bo := backoff.NewExponentialBackOff(backoff.Option{InitialInterval: reconnectFirst, MaxInterval: reconnectMax})
	for gen := 1; ctx.Err() == nil; gen++ {
		streamCtx, endStream := context.WithCancel(ctx)
		client := h.New(gen, oneStream{BackOff: bo, end: endStream})
		var synced bool
		var wg sync.WaitGroup
		streamDone := make(chan struct{})
		wg.Go(func() {
			select {
			case <-client.Synced():
				synced = true
				h.Synced(gen)
				bo.Reset()
			case <-streamDone:
			}
		})
		client.Run(streamCtx)
		endStream()
		close(streamDone)
		wg.Wait()
		if gen == 1 && !synced {
			return false
		}
		if !sleepCtx(ctx, bo.NextBackOff()) {
			return true
		}
	}
	return true
}

// oneStream is a backoff policy that ends adsc's client when its stream breaks (adsc asks it for
// the wait before reconnecting), so Run reconnects with a new client.
type oneStream struct {
	backoff.BackOff
	end context.CancelFunc
}

func (o oneStream) NextBackOff() time.Duration { o.end(); return 0 }
func (o oneStream) Reset()                     {}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
