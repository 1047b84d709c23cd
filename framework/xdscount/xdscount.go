// Package xdscount counts what an xDS client of istiod received, per resource type: responses
// (pushes), resources, removals and bytes. It watches the client's gRPC connection (a stats
// handler), so it keeps no resource and needs nothing of the client's code.
package xdscount

import (
	"context"
	"maps"
	"sort"
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
)

// Count is what one resource type brought.
type Count struct {
	// Pushes are the responses istiod sent (each one the client acknowledges).
	Pushes int64 `json:"pushes"`
	// Resources are the resources those responses carried; Removed the names they removed.
	Resources int64 `json:"resources"`
	Removed   int64 `json:"removed,omitempty"`
	// Bytes are the responses' message bytes, uncompressed, without gRPC or HTTP/2 framing.
	Bytes int64 `json:"bytes"`
}

func (c Count) add(o Count) Count {
	return Count{Pushes: c.Pushes + o.Pushes, Resources: c.Resources + o.Resources, Removed: c.Removed + o.Removed, Bytes: c.Bytes + o.Bytes}
}

func (c Count) sub(o Count) Count {
	return Count{Pushes: c.Pushes - o.Pushes, Resources: c.Resources - o.Resources, Removed: c.Removed - o.Removed, Bytes: c.Bytes - o.Bytes}
}

// Counts are Counts by type, named as istiod's metrics name them (cds, lds, eds, rds, sds, wds,
// wads, ...; the type URL where istiod has no name for it).
type Counts map[string]Count

// Total is every type's counts together.
func (cs Counts) Total() Count {
	var t Count
	for _, c := range cs {
		t = t.add(c)
	}
	return t
}

// Since is what arrived between earlier and cs (cs taken later from the same Counter, or sums of
// such).
func (cs Counts) Since(earlier Counts) Counts {
	out := Counts{}
	for t, c := range cs {
		if d := c.sub(earlier[t]); d != (Count{}) {
			out[t] = d
		}
	}
	return out
}

// Plus is cs and o added type by type.
func (cs Counts) Plus(o Counts) Counts {
	out := maps.Clone(cs)
	if out == nil {
		out = Counts{}
	}
	for t, c := range o {
		out[t] = out[t].add(c)
	}
	return out
}

// Types are the types counted, sorted.
func (cs Counts) Types() []string {
	ts := make([]string, 0, len(cs))
	for t := range cs {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// Counter counts the delta xDS responses a client connection receives. One Counter may watch
// several connections (a client's reconnects): its counts keep growing across them.
type Counter struct {
	mu     sync.Mutex
	counts Counts
}

// New is a Counter with nothing counted.
func New() *Counter { return &Counter{counts: Counts{}} }

// DialOption installs the counter on a connection (adsc.Config.GrpcOpts).
func (c *Counter) DialOption() grpc.DialOption { return grpc.WithStatsHandler(handler{c}) }

// Counts is what has arrived so far.
func (c *Counter) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Observe counts one response as it arrived in length bytes (what the stats handler does for each).
func (c *Counter) Observe(r *discovery.DeltaDiscoveryResponse, length int) {
	t := v3.GetMetricType(r.GetTypeUrl())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[t] = c.counts[t].add(Count{Pushes: 1, Resources: int64(len(r.GetResources())), Removed: int64(len(r.GetRemovedResources())), Bytes: int64(length)})
}

// handler is the gRPC stats handler: it sees each received message decoded, with its length,
// before the client's code does.
type handler struct{ c *Counter }

func (h handler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (h handler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (h handler) HandleConn(context.Context, stats.ConnStats)                       {}

func (h handler) HandleRPC(_ context.Context, s stats.RPCStats) {
	in, ok := s.(*stats.InPayload)
	if !ok || !in.IsClient() {
		return
	}
	if r, ok := in.Payload.(*discovery.DeltaDiscoveryResponse); ok {
		h.c.Observe(r, in.Length)
	}
}
