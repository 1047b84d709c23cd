package xdswatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"istio.io/istio/pkg/workloadapi"
)

// applyLocked sets (or, with a nil a, removes) one resource and tells the subscribers.
func (w *Watcher) applyLocked(name string, a *workloadapi.Address, at time.Time) {
	if a == nil {
		delete(w.addrs, name)
	} else {
		w.addrs[name] = a
	}
	w.seq++
	u := Update{Name: name, Address: a, At: at, Seq: w.seq}
	for _, fn := range w.subs {
		fn(u)
	}
	w.notifyLocked()
}

// Drop makes the watcher lose what drop matches, from now until Drop(nil): matching resources leave
// its state at once, and updates that match are ignored, as a ztunnel whose stream lost those
// events would. A fault for the istiod checks' controls (istiodcheck), never set otherwise.
func (w *Watcher) Drop(drop func(name string, a *workloadapi.Address) bool) {
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drop = drop
	if drop == nil {
		return
	}
	for name, a := range w.addrs {
		if drop(name, a) {
			w.applyLocked(name, nil, at)
		}
	}
}

// notifyLocked wakes every WaitFor: the state, the stream's sync or its reconnect count changed.
func (w *Watcher) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Subscribe calls fn with every update applied from now on, in arrival order, on the stream's
// goroutine and under the watcher's lock: fn must be quick and must not call the watcher. It also
// returns the state as it was when the subscription began (no update falls between the two), and
// a function that stops the calls.
func (w *Watcher) Subscribe(fn func(Update)) (state map[string]*workloadapi.Address, unsubscribe func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	state = make(map[string]*workloadapi.Address, len(w.addrs))
	for k, v := range w.addrs {
		state[k] = v
	}
	if w.subs == nil {
		w.subs = map[int]func(Update){}
	}
	id := w.nextSub
	w.nextSub++
	w.subs[id] = fn
	return state, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs, id)
	}
}

// Seq is how many updates the watcher has applied.
func (w *Watcher) Seq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

// Addresses returns a copy of the current state, keyed by resource name.
func (w *Watcher) Addresses() map[string]*workloadapi.Address {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.addrs)
}

// SplitHorizon summarises the split-horizon workloads istiod sends for a remote network: one per
// global service, carrying the network's endpoint count as capacity, reached via Gateway.
type SplitHorizon struct {
	Workloads int
	Capacity  uint64
	Gateways  map[string]bool // network gateway addresses seen
	Services  map[string]bool // ns/hostname keys
}

// SplitHorizonFor returns what the watcher currently holds for network.
func (w *Watcher) SplitHorizonFor(network string) SplitHorizon { return w.SplitHorizonOf(network, nil) }

// SplitHorizonOf is SplitHorizonFor counting only the split-horizon workloads of services (keys
// "ns/hostname") that keep accepts; nil keeps all.
func (w *Watcher) SplitHorizonOf(network string, keep func(service string) bool) SplitHorizon {
	sh := SplitHorizon{Gateways: map[string]bool{}, Services: map[string]bool{}}
	for name, a := range w.Addresses() {
		wl := a.GetWorkload()
		if wl == nil || wl.GetNetwork() != network || !strings.Contains(name, "/SplitHorizonWorkload/") {
			continue
		}
		if keep != nil && !slices.ContainsFunc(slices.Collect(maps.Keys(wl.GetServices())), keep) {
			continue
		}
		sh.Workloads++
		sh.Capacity += uint64(wl.GetCapacity().GetValue())
		if gw := wl.GetNetworkGateway().GetAddress(); gw != nil {
			sh.Gateways[ipString(gw.GetAddress())] = true
		}
		for svc := range wl.GetServices() {
			sh.Services[svc] = true
		}
	}
	return sh
}

// PodWorkloads counts the pod workloads of cluster the watcher holds with an address of their own
// (how istiod sends the pods of a cluster on the watcher's own network), counting only those of
// services (keys "ns/hostname") that keep accepts; nil keeps all.
func (w *Watcher) PodWorkloads(cluster string, keep func(service string) bool) int {
	n := 0
	for name, a := range w.Addresses() {
		wl := a.GetWorkload()
		if wl == nil || wl.GetClusterId() != cluster || !strings.Contains(name, "/Pod/") || len(wl.GetAddresses()) == 0 {
			continue
		}
		if keep != nil && !slices.ContainsFunc(slices.Collect(maps.Keys(wl.GetServices())), keep) {
			continue
		}
		n++
	}
	return n
}

// Changed returns a channel that is closed at the next change of the state.
func (w *Watcher) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// WaitFor blocks until cond holds for the watcher's state, or ctx ends.
func (w *Watcher) WaitFor(ctx context.Context, cond func(*Watcher) bool) error {
	for {
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		if cond(w) {
			return nil
		}
		select {
		case <-changed:
		case <-w.done:
			return errors.New("xDS watcher: closed")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func ipString(b []byte) string {
	if len(b) == 4 {
		return fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3])
	}
	return fmt.Sprintf("%x", b)
}
