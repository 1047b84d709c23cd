// Package envoyxds is an Envoy-like client of istiod's xDS: it connects as the Envoy of an
// east-west gateway's or a waypoint's pod of the pinned Istio does (the node ID and metadata
// pilot-agent builds for that pod, delta ADS, the subscriptions Envoy makes, mTLS on the secure
// port with the pod's service account), acknowledges every push, and keeps only what arrived:
// counts and sizes per type and how many resources it holds, never the resources. Delta, because
// the bootstrap pilot-agent writes for a waypoint-type node always asks for DELTA_GRPC (and
// ISTIO_DELTA_XDS defaults to it for every node: pkg/bootstrap/config.go toTemplateParams).
package envoyxds

import (
	"context"
	"fmt"
	"sync"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tls "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"istio.io/istio/pilot/pkg/model"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	"istio.io/istio/pkg/adsc"
	"istio.io/istio/pkg/backoff"
	istiolog "istio.io/istio/pkg/log"
	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/framework/xdscount"
	"github.com/ambientmc/ambientmc/framework/xdsstream"
)

// Config says where to connect and whose proxy to be.
type Config struct {
	// Address is istiod's secure xDS address (15012) as this process reaches it.
	Address string
	// CertDir holds cert-chain.pem, key.pem and root-cert.pem: the pod's service account's
	// identity from the cluster's CA, which istiod accepts as client-certificate authentication.
	CertDir string
	Pod     Pod
}

// Client is one proxy's stream to istiod. Like Envoy it reconnects with backoff when the stream
// breaks (istiod restarted); its counts run on across streams, what it holds is the current
// stream's.
type Client struct {
	cfg     Config
	counter *xdscount.Counter
	cancel  context.CancelFunc
	done    chan struct{}
	synced  chan struct{} // closed at the first stream's initial answer

	mu         sync.Mutex
	gen        int
	held       map[string]map[string]bool // metric type -> resource names, of stream gen
	reconnects int
	answered   bool          // stream gen has had its first answer
	changed    chan struct{} // closed and replaced when a stream is answered
}

// quietADSC silences adsc's delta client: its per-resource lines, and its Fatalf on a dependency
// whose parent went first (an EDS removal after its cluster's), which would exit the process
// where the tree only needs the child dropped, as it then does.
var quietADSC sync.Once

// Start connects and waits until istiod has answered the initial subscriptions (clusters,
// listeners and the workloads Envoy's metadata discovery asks for).
func Start(ctx context.Context, cfg Config, syncTimeout time.Duration) (*Client, error) {
	quietADSC.Do(func() {
		if s := istiolog.FindScope("deltaadsc"); s != nil {
			s.SetOutputLevel(istiolog.NoneLevel)
		}
	})
	meta, err := cfg.Pod.Metadata()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, counter: xdscount.New(), done: make(chan struct{}), synced: make(chan struct{}), changed: make(chan struct{})}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	first := make(chan struct{})
	go func() {
		defer close(c.done)
		c.run(runCtx, meta, first)
	}()
	timer := time.NewTimer(syncTimeout)
	defer timer.Stop()
	name := cfg.Pod.Namespace + "/" + cfg.Pod.Name
	select {
	case <-c.synced:
		return c, nil
	case <-first:
		c.Close()
		return nil, fmt.Errorf("%s proxy %s: the stream to istiod at %s ended before its initial answer (is the address istiod's secure xDS port, and the certificate from the cluster's CA?)", cfg.Pod.Kind, name, cfg.Address)
	case <-timer.C:
		c.Close()
		return nil, fmt.Errorf("%s proxy %s: istiod at %s did not answer clusters, listeners and workloads within %s", cfg.Pod.Kind, name, cfg.Address, syncTimeout)
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
}

// Pod is the pod the client stands in for.
func (c *Client) Pod() Pod { return c.cfg.Pod }

// Counts are what istiod has pushed so far, per type.
func (c *Client) Counts() xdscount.Counts { return c.counter.Counts() }

// Held is how many resources of each type the client holds now.
func (c *Client) Held() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for t, names := range c.held {
		out[t] = len(names)
	}
	return out
}

// Holds says whether the client holds resource name of type (a metric type name: cds, lds, ...).
func (c *Client) Holds(typ, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[typ][name]
}

// Reconnects is how many times a broken stream was established again.
func (c *Client) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnects
}

// Close ends the stream.
func (c *Client) Close() {
	c.cancel()
	<-c.done
}

// Done is closed once the client has stopped.
func (c *Client) Done() <-chan struct{} { return c.done }

// run keeps a stream until ctx ends, each a new adsc client after a backoff (xdsstream).
func (c *Client) run(ctx context.Context, meta *structpb.Struct, first chan struct{}) {
	answered := xdsstream.Run(ctx, xdsstream.Hooks{Synced: c.answeredStream, New: func(gen int, policy backoff.BackOff) *adsc.Client {
		c.mu.Lock()
		c.gen, c.held, c.answered = gen, map[string]map[string]bool{}, false
		if gen > 1 {
			c.reconnects++
		}
		c.mu.Unlock()
		return adsc.NewDelta(c.cfg.Address, &adsc.DeltaADSConfig{Config: adsc.Config{
			ClientName:    "ambientmc-" + string(c.cfg.Pod.Kind) + "-" + c.cfg.Pod.Name,
			NodeType:      model.Waypoint,
			IP:            c.cfg.Pod.IP,
			Namespace:     c.cfg.Pod.Namespace,
			Workload:      c.cfg.Pod.Name,
			Meta:          proto.Clone(meta).(*structpb.Struct),
			CertDir:       c.cfg.CertDir,
			XDSSAN:        "istiod.istio-system.svc",
			GrpcOpts:      []grpc.DialOption{c.counter.DialOption()},
			BackoffPolicy: policy,
		}}, c.handlers(gen)...)
	}})
	if !answered {
		close(first)
	}
}

// handlers subscribe as Envoy of a waypoint-type proxy does: clusters and listeners (its ADS
// bootstrap's dynamic resources) and, for metadata discovery, every workload
// (tools/packaging/common/envoy_bootstrap.json: the metadata_discovery extension over ADS, on for
// waypoint nodes by pkg/bootstrap/config.go); then the endpoints, routes and secrets those name.
func (c *Client) handlers(gen int) []adsc.Option {
	return []adsc.Option{
		adsc.Register(func(ctx adsc.HandlerContext, name, _ string, r *cluster.Cluster, ev adsc.Event) {
			if c.hold(gen, v3.ClusterType, name, ev) {
				ctx.RegisterDependency(v3.EndpointType, endpointNames(r)...)
				ctx.RegisterDependency(v3.SecretType, clusterSecrets(r)...)
			}
		}),
		adsc.Register(func(ctx adsc.HandlerContext, name, _ string, r *listener.Listener, ev adsc.Event) {
			if c.hold(gen, v3.ListenerType, name, ev) {
				routes, secrets := listenerDeps(r)
				ctx.RegisterDependency(v3.RouteType, routes...)
				ctx.RegisterDependency(v3.SecretType, secrets...)
			}
		}),
		adsc.Register(func(_ adsc.HandlerContext, name, _ string, _ *route.RouteConfiguration, ev adsc.Event) {
			c.hold(gen, v3.RouteType, name, ev)
		}),
		adsc.Register(func(_ adsc.HandlerContext, name, _ string, _ *endpoint.ClusterLoadAssignment, ev adsc.Event) {
			c.hold(gen, v3.EndpointType, name, ev)
		}),
		adsc.Register(func(_ adsc.HandlerContext, name, _ string, _ *tls.Secret, ev adsc.Event) {
			c.hold(gen, v3.SecretType, name, ev)
		}),
		adsc.Register(func(_ adsc.HandlerContext, name, _ string, _ *workloadapi.Workload, ev adsc.Event) {
			c.hold(gen, v3.WorkloadType, name, ev)
		}),
		adsc.Watch[*cluster.Cluster]("*"),
		adsc.Watch[*listener.Listener]("*"),
		adsc.Watch[*workloadapi.Workload]("*"),
	}
}

// hold records that stream gen now holds (or, removed, no longer holds) name; it says whether the
// resource was added, so its dependencies are to be asked for.
func (c *Client) hold(gen int, typeURL, name string, ev adsc.Event) bool {
	t := v3.GetMetricType(typeURL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return false
	}
	if ev == adsc.EventDelete {
		delete(c.held[t], name)
		return false
	}
	if c.held[t] == nil {
		c.held[t] = map[string]bool{}
	}
	c.held[t][name] = true
	return true
}

// answeredStream records that stream gen has had its first answer.
func (c *Client) answeredStream(gen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	c.answered = true
	close(c.changed)
	c.changed = make(chan struct{})
	if gen == 1 {
		close(c.synced)
	}
}

// WaitSynced waits until the client has reconnected at least reconnects times and its stream has
// had its first answer (after an istiod restart: the new istiod's).
func (c *Client) WaitSynced(ctx context.Context, reconnects int) error {
	for {
		c.mu.Lock()
		done, changed, have := c.reconnects >= reconnects && c.answered, c.changed, c.reconnects
		c.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-c.done:
			return fmt.Errorf("the client stopped (%d reconnects, waiting for %d)", have, reconnects)
		case <-ctx.Done():
			return fmt.Errorf("no answer from istiod after %d reconnects (waiting for %d): %w", have, reconnects, ctx.Err())
		}
	}
}
