// Package xdswatch is a ztunnel-like client of istiod's ambient workload xDS: it connects as a
// ztunnel would (delta ADS, wildcard Address and Authorization watches, ztunnel node ID, mTLS on
// the secure port) and keeps what istiod sends, so tests can wait for what a ztunnel would see.
package xdswatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/pki"
	"google.golang.org/protobuf/types/known/structpb"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/adsc"
	"istio.io/istio/pkg/backoff"
	istiolog "istio.io/istio/pkg/log"
	"istio.io/istio/pkg/workloadapi"
	"istio.io/istio/pkg/workloadapi/security"
)

// Config says where to connect and who to be.
type Config struct {
	// Address is istiod's secure xDS address (host:port).
	Address string
	// CertDir holds cert-chain.pem, key.pem and root-cert.pem: a ztunnel identity from the
	// cluster's CA, which istiod accepts as client-certificate authentication.
	CertDir string
	// IP, Name and Node describe the ztunnel pod this watcher stands in for.
	IP, Name, Node string
	// Cluster is the cluster ID sent in the node metadata, as the ztunnel chart sets it.
	Cluster string
}

// Watcher holds the Address resources last received from istiod. Like ztunnel it keeps what it
// has when the stream breaks and reconnects with backoff; the new stream's initial answer replaces
// the state (what it no longer holds is removed, as istiod would say for the resource versions a
// ztunnel reconnects with).
type Watcher struct {
	cfg    Config
	meta   *structpb.Struct
	cancel context.CancelFunc
	done   chan struct{}
	synced chan struct{} // closed at the first stream's initial sync

	mu         sync.Mutex
	addrs      map[string]*workloadapi.Address
	changed    chan struct{} // closed and replaced on every change
	seq        uint64        // updates applied so far
	subs       map[int]func(Update)
	nextSub    int
	gen        int             // the current stream; callbacks of older ones are dropped
	seen       map[string]bool // what the current stream has sent, until its initial sync
	reconnects int
	lastSync   time.Time
}

// Update is one Address resource change as the watcher applied it.
type Update struct {
	// Name is the resource name (a workload UID or ns/hostname).
	Name string
	// Address is the new resource; nil when istiod removed it.
	Address *workloadapi.Address
	// At is when the resource arrived in this process (taken as adsc hands it over, before the
	// state changes), so latencies measured against it include istiod's debounce and the stream.
	At time.Time
	// Seq counts the updates this watcher applied, from 1.
	Seq uint64
}

// quietADSC keeps adsc's per-resource info lines (one per workload) out of test output.
var quietADSC sync.Once

// Reconnect backoff after a broken stream: exponential from reconnectFirst to reconnectMax.
const (
	reconnectFirst = 100 * time.Millisecond
	reconnectMax   = 5 * time.Second
)

// Start connects and waits until istiod has answered the initial watches.
func Start(ctx context.Context, cfg Config, syncTimeout time.Duration) (*Watcher, error) {
	quietADSC.Do(func() {
		for _, name := range []string{"deltaadsc", "adsc"} {
			if s := istiolog.FindScope(name); s != nil {
				s.SetOutputLevel(istiolog.ErrorLevel)
			}
		}
	})
	meta, err := structpb.NewStruct(map[string]any{
		"NAMESPACE":  pki.IstioNamespace,
		"NODE_NAME":  cfg.Node,
		"CLUSTER_ID": cfg.Cluster,
	})
	if err != nil {
		return nil, err
	}
	w := &Watcher{cfg: cfg, meta: meta, addrs: map[string]*workloadapi.Address{}, changed: make(chan struct{}),
		done: make(chan struct{}), synced: make(chan struct{})}
	runCtx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	first := make(chan struct{}) // the first stream ended
	go func() {
		defer close(w.done)
		w.run(runCtx, first)
	}()
	timer := time.NewTimer(syncTimeout)
	defer timer.Stop()
	select {
	case <-w.synced:
		return w, nil
	case <-first:
		w.Close()
		return nil, fmt.Errorf("xDS watcher %s: the stream to %s ended before the initial sync (see the test log for adsc's reason)", cfg.Name, cfg.Address)
	case <-timer.C:
		w.Close()
		return nil, fmt.Errorf("xDS watcher %s: no initial sync from %s within %s", cfg.Name, cfg.Address, syncTimeout)
	case <-ctx.Done():
		w.Close()
		return nil, ctx.Err()
	}
}

// run keeps a stream to istiod until ctx ends: each stream is a new adsc client, started after a
// backoff once the previous one broke. first is closed when the first stream ends unsynced.
func (w *Watcher) run(ctx context.Context, first chan struct{}) {
	bo := backoff.NewExponentialBackOff(backoff.Option{InitialInterval: reconnectFirst, MaxInterval: reconnectMax})
	for gen := 1; ctx.Err() == nil; gen++ {
		w.mu.Lock()
		w.gen, w.seen = gen, map[string]bool{}
		w.mu.Unlock()
		streamCtx, endStream := context.WithCancel(ctx)
		client := adsc.NewDelta(w.cfg.Address, &adsc.DeltaADSConfig{Config: adsc.Config{
			ClientName: "ambientmc-watch-" + w.cfg.Name,
			NodeType:   model.Ztunnel,
			IP:         w.cfg.IP,
			Namespace:  pki.IstioNamespace,
			Workload:   w.cfg.Name,
			Meta:       w.meta,
			CertDir:    w.cfg.CertDir,
			XDSSAN:     "istiod.istio-system.svc",
			// adsc would reconnect by itself, keeping its tree: one stream per client instead, so
			// that each new stream's answer replaces the state.
			BackoffPolicy: oneStream{BackOff: bo, end: endStream},
		}},
			adsc.Register(func(hc adsc.HandlerContext, name, v string, a *workloadapi.Address, ev adsc.Event) {
				w.onAddress(gen, name, a, ev)
			}),
			adsc.Register(func(adsc.HandlerContext, string, string, *security.Authorization, adsc.Event) {}),
			adsc.Watch[*workloadapi.Address]("*"),
			adsc.Watch[*security.Authorization]("*"),
		)
		streamDone := make(chan struct{})
		go func() {
			select {
			case <-client.Synced():
				w.onSynced(gen)
				bo.Reset()
			case <-streamDone:
			}
		}()
		client.Run(streamCtx)
		endStream()
		close(streamDone)
		if gen == 1 && !w.hasSynced() {
			close(first)
			return
		}
		if !sleepCtx(ctx, bo.NextBackOff()) {
			return
		}
	}
}

// oneStream is a backoff policy that ends adsc's client when its stream breaks (adsc asks it for
// the wait before reconnecting), so the watcher reconnects with a new client.
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
	w.seen, w.lastSync = nil, at
	if gen == 1 {
		close(w.synced)
	} else {
		w.reconnects++
	}
}

func (w *Watcher) onAddress(gen int, name string, a *workloadapi.Address, ev adsc.Event) {
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen {
		return
	}
	if ev == adsc.EventDelete {
		a = nil
	}
	if w.seen != nil && a != nil {
		w.seen[name] = true
	}
	w.applyLocked(name, a, at)
}

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
	close(w.changed)
	w.changed = make(chan struct{})
}

// Cluster is the cluster ID the watcher presents as its own (Config.Cluster).
func (w *Watcher) Cluster() string { return w.cfg.Cluster }

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

// Close stops the stream.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
}

// Addresses returns a copy of the current state, keyed by resource name.
func (w *Watcher) Addresses() map[string]*workloadapi.Address {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]*workloadapi.Address, len(w.addrs))
	for k, v := range w.addrs {
		out[k] = v
	}
	return out
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

// Done is closed when the watcher has stopped (Close); a broken stream is re-established.
func (w *Watcher) Done() <-chan struct{} { return w.done }

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
