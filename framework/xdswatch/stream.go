package xdswatch

import (
	"context"
	"maps"
	"time"

	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/xdsstream"
	"google.golang.org/grpc"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/adsc"
	"istio.io/istio/pkg/backoff"
	"istio.io/istio/pkg/workloadapi"
	"istio.io/istio/pkg/workloadapi/security"
)

// run keeps a stream to istiod until ctx ends: each stream a new adsc client, started after a
// backoff once the previous one broke (xdsstream). first is closed when the first stream ends
// unsynced.
func (w *Watcher) run(ctx context.Context, first chan struct{}) {
	answered := xdsstream.Run(ctx, xdsstream.Hooks{Synced: w.onSynced, New: func(gen int, policy backoff.BackOff) *adsc.Client {
		w.mu.Lock()
		w.gen, w.seen, w.seenPol = gen, map[string]bool{}, map[string]bool{}
		w.mu.Unlock()
		return adsc.NewDelta(w.cfg.Address, &adsc.DeltaADSConfig{Config: adsc.Config{
			ClientName:    "ambientmc-watch-" + w.cfg.Name,
			NodeType:      model.Ztunnel,
			IP:            w.cfg.IP,
			Namespace:     pki.IstioNamespace,
			Workload:      w.cfg.Name,
			Meta:          w.meta,
			CertDir:       w.cfg.CertDir,
			XDSSAN:        "istiod.istio-system.svc",
			GrpcOpts:      []grpc.DialOption{w.counter.DialOption()},
			BackoffPolicy: policy,
		}},
			adsc.Register(func(hc adsc.HandlerContext, name, v string, a *workloadapi.Address, ev adsc.Event) {
				w.onAddress(gen, name, a, ev)
			}),
			adsc.Register(func(_ adsc.HandlerContext, name, _ string, a *security.Authorization, ev adsc.Event) {
				w.onPolicy(gen, name, a, ev)
			}),
			adsc.Watch[*workloadapi.Address]("*"),
			adsc.Watch[*security.Authorization]("*"),
		)
	}})
	if !answered {
		close(first)
	}
}

func (w *Watcher) hasSynced() bool {
	select {
	case <-w.synced:
		return true
	default:
		return false
	}
}

// onSynced ends stream gen's initial answer: what it did not send is gone.
func (w *Watcher) onSynced(gen int) {
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen {
		return
	}
	for name := range w.addrs {
		if !w.seen[name] {
			w.applyLocked(name, nil, at)
		}
	}
	for name := range w.policies {
		if !w.seenPol[name] {
			delete(w.policies, name)
		}
	}
	w.seen, w.seenPol, w.lastSync = nil, nil, at
	if gen == 1 {
		close(w.synced)
	} else {
		w.reconnects++
	}
	// A WaitFor on LastSync or Reconnects must see this even when no address changes after it:
	// without the wake-up, one waiting for a restarted istiod's answer slept until its timeout.
	w.notifyLocked()
}

func (w *Watcher) onAddress(gen int, name string, a *workloadapi.Address, ev adsc.Event) {
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen || w.cfg.HoldNothing {
		return
	}
	if ev == adsc.EventDelete {
		a = nil
	}
	if a != nil && w.drop != nil && w.drop(name, a) {
		return
	}
	if w.seen != nil && a != nil {
		w.seen[name] = true
	}
	w.applyLocked(name, a, at)
}

// onPolicy keeps or removes one Authorization resource. Policies change no Address: they wake
// waiters (and Follow's views) without an Update.
func (w *Watcher) onPolicy(gen int, name string, a *security.Authorization, ev adsc.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen || w.cfg.HoldNothing {
		return
	}
	if ev == adsc.EventDelete || a == nil {
		delete(w.policies, name)
	} else {
		w.policies[name] = a
		if w.seenPol != nil {
			w.seenPol[name] = true
		}
	}
	w.notifyLocked()
}

// Authorizations are the Authorization resources held, by resource name.
func (w *Watcher) Authorizations() map[string]*security.Authorization {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.policies)
}

// Reconnects is how many times a broken stream was re-established and answered in full.
func (w *Watcher) Reconnects() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reconnects
}

// LastSync is when the current stream's initial answer was complete (zero while a reconnected
// stream has not answered yet).
func (w *Watcher) LastSync() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen != nil {
		return time.Time{}
	}
	return w.lastSync
}
