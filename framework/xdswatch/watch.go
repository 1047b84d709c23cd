// Package xdswatch is a ztunnel-like client of istiod's ambient workload xDS: it connects as a
// ztunnel would (delta ADS, wildcard Address and Authorization watches, ztunnel node ID, mTLS on
// the secure port) and keeps what istiod sends, so tests can wait for what a ztunnel would see.
package xdswatch

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/xdscount"
	"google.golang.org/protobuf/types/known/structpb"
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
	// HoldNothing makes a client that only loads istiod: it watches and acknowledges as a ztunnel
	// does but keeps no Address, so its state stays empty and it reports no update. Each one that
	// held them would hold every workload of the mesh.
	HoldNothing bool
}

// Watcher holds the Address and Authorization resources last received from istiod. Like ztunnel it keeps what it
// has when the stream breaks and reconnects with backoff; the new stream's initial answer replaces
// the state (what it no longer holds is removed, as istiod would say for the resource versions a
// ztunnel reconnects with).
type Watcher struct {
	cfg     Config
	meta    *structpb.Struct
	counter *xdscount.Counter // what istiod pushed, over every stream
	cancel  context.CancelFunc
	done    chan struct{}
	synced  chan struct{} // closed at the first stream's initial sync

	mu         sync.Mutex
	addrs      map[string]*workloadapi.Address
	policies   map[string]*security.Authorization // by resource name, as ztunnel enforces them
	seenPol    map[string]bool                    // policies the current stream has sent, until its sync
	changed    chan struct{}                      // closed and replaced on every change
	seq        uint64                             // updates applied so far
	subs       map[int]func(Update)
	nextSub    int
	gen        int             // the current stream; callbacks of older ones are dropped
	seen       map[string]bool // what the current stream has sent, until its initial sync
	reconnects int
	lastSync   time.Time
	// drop, when set, matches updates the watcher ignores (Drop).
	drop func(name string, a *workloadapi.Address) bool
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

// quietADSC keeps adsc's per-resource info lines (one per workload) out of test output. The delta
// client's scope is silenced altogether, as envoyxds does (whichever starts first, the other must
// not raise it again): its Fatalf on a dependency dropped after its parent would exit the process.
var quietADSC sync.Once

// Start connects and waits until istiod has answered the initial watches.
func Start(ctx context.Context, cfg Config, syncTimeout time.Duration) (*Watcher, error) {
	quietADSC.Do(func() {
		if s := istiolog.FindScope("adsc"); s != nil {
			s.SetOutputLevel(istiolog.ErrorLevel)
		}
		if s := istiolog.FindScope("deltaadsc"); s != nil {
			s.SetOutputLevel(istiolog.NoneLevel)
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
	w := &Watcher{cfg: cfg, meta: meta, counter: xdscount.New(), addrs: map[string]*workloadapi.Address{},
		policies: map[string]*security.Authorization{}, changed: make(chan struct{}),
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

// Cluster is the cluster ID the watcher presents as its own (Config.Cluster).
func (w *Watcher) Cluster() string { return w.cfg.Cluster }

// Counts are what istiod has pushed this watcher so far, per type (none for a Holding watcher).
func (w *Watcher) Counts() xdscount.Counts {
	if w.counter == nil {
		return nil
	}
	return w.counter.Counts()
}

// Close stops the stream.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
}

// Done is closed when the watcher has stopped (Close); a broken stream is re-established.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Holding is a watcher of cluster's ztunnel with no stream that holds addrs (by resource name)
// and never changes: for tests of what is judged from a watcher's state.
func Holding(cluster string, addrs map[string]*workloadapi.Address) *Watcher {
	done := make(chan struct{})
	close(done)
	return &Watcher{cfg: Config{Cluster: cluster}, cancel: func() {}, addrs: maps.Clone(addrs), changed: make(chan struct{}), done: done}
}
