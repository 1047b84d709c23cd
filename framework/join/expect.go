package join

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"github.com/ambientmc/ambientmc/topology"
)

// Expect is what a ztunnel-like client of one istiod must hold of each cluster: every cluster was
// loaded with Scale, and the istiod holds the clusters Members lists.
type Expect struct {
	Scale    workload.Scale
	Clusters []*cluster.Cluster
	// Members are the clusters the istiod holds (its own and the joined). Nil for an istiod that
	// holds only the remote cluster its check gave it (Isolated).
	Members func() []string
	// Gateway is a cluster's east-west gateway address.
	Gateway func(cluster string) string
}

// ExpectOf is what a client of one of x's mesh's istiods holds: its members, their gateways.
func ExpectOf(x *expctx.Context) Expect {
	return Expect{Scale: x.Scale, Clusters: x.Clusters, Members: x.Mesh.Joined, Gateway: x.Mesh.GatewayAddress}
}

// Isolated is e for an istiod that holds only the remote cluster it was given, not the mesh's
// members.
func (e Expect) Isolated() Expect {
	e.Members = nil
	return e
}

func (e Expect) cluster(name string) *cluster.Cluster {
	for _, c := range e.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// onNetwork is how many clusters on c's network the watcher's istiod holds besides c: istiod
// coalesces a remote network's endpoints of a service into one split-horizon workload whose
// capacity sums every cluster on that network (ambient/multicluster.go, CoalesedWorkloads).
func (e Expect) onNetwork(w *xdswatch.Watcher, c *cluster.Cluster) int {
	if e.Members == nil {
		return 0
	}
	n := 0
	for _, name := range e.Members() {
		if o := e.cluster(name); o != nil && name != c.Name && name != w.Cluster() && o.Network == c.Network {
			n++
		}
	}
	return n
}

// networkGateways are the east-west gateway addresses of the clusters on network: istiod sends
// the first it finds for the whole network (istio/istio#56960).
func (e Expect) networkGateways(network string) map[string]bool {
	gws := map[string]bool{}
	for _, o := range e.Clusters {
		if o.Network == network {
			gws[e.Gateway(o.Name)] = true
		}
	}
	return gws
}

// RelationTo is how the watcher's cluster reaches c: the join criterion and the data path follow it.
func (e Expect) RelationTo(w *xdswatch.Watcher, c *cluster.Cluster) topology.Relation {
	from := e.cluster(w.Cluster())
	if from == nil {
		return topology.OtherNetwork
	}
	return topology.RelationOf(from.Cluster, c.Cluster)
}

// Criterion names in the report what a join of c waits for on a client of from's istiod.
func Criterion(from, c *cluster.Cluster) string {
	if topology.RelationOf(from.Cluster, c.Cluster) == topology.SameNetwork {
		return report.CriterionPodWorkloads
	}
	return report.CriterionSplitHorizon
}

// Holds says whether the watcher has everything a ztunnel needs to reach c's scale pods, and
// nothing more: for a cluster on another network one split-horizon workload per global service,
// capacities summing to the pods of c and of every other held cluster on its network, via one of
// that network's gateways; for one on the watcher's own network every scale pod as a workload with
// its own address, reached directly.
func (e Expect) Holds(c *cluster.Cluster) func(*xdswatch.Watcher) bool { return e.reaches(c, true) }

// Covers is Holds allowing more: the probe services the data-plane suites add.
func (e Expect) Covers(c *cluster.Cluster) func(*xdswatch.Watcher) bool { return e.reaches(c, false) }

// reaches counts the scale services only and wants their counts exactly when exact, else counts
// every service and wants at least the scale's.
func (e Expect) reaches(c *cluster.Cluster, exact bool) func(*xdswatch.Watcher) bool {
	gws := e.networkGateways(c.Network)
	keep := IsScaleService
	enough := func(have, want int) bool { return have == want }
	if !exact {
		keep, enough = nil, func(have, want int) bool { return have >= want }
	}
	return func(w *xdswatch.Watcher) bool {
		if e.RelationTo(w, c) == topology.SameNetwork {
			return enough(w.PodWorkloads(c.Name, keep), e.Scale.Pods)
		}
		sh := w.SplitHorizonOf(c.Network, keep)
		// Through the network's gateways only; with several on it istiod may pick another one
		// per service.
		via := len(sh.Gateways) > 0
		for gw := range sh.Gateways {
			via = via && gws[gw]
		}
		return enough(sh.Workloads, e.Scale.Services) && enough(int(sh.Capacity), e.Scale.Pods*(1+e.onNetwork(w, c))) && via
	}
}

// HeldOf describes what the watcher holds of c, for failure messages.
func (e Expect) HeldOf(w *xdswatch.Watcher, c *cluster.Cluster) string {
	if e.RelationTo(w, c) == topology.SameNetwork {
		return fmt.Sprintf("%d of %d pod workloads of %s (same network)", w.PodWorkloads(c.Name, IsScaleService), e.Scale.Pods, c.Name)
	}
	sh := w.SplitHorizonOf(c.Network, IsScaleService)
	return fmt.Sprintf("%d split-horizon workloads (capacity %d) for %s, want %d (capacity %d)",
		sh.Workloads, sh.Capacity, c.Network, e.Scale.Services, e.Scale.Pods*(1+e.onNetwork(w, c)))
}

// Lacks says whether the watcher no longer holds anything of c's pods.
func (e Expect) Lacks(c *cluster.Cluster) func(*xdswatch.Watcher) bool {
	return func(w *xdswatch.Watcher) bool {
		if e.RelationTo(w, c) == topology.SameNetwork {
			return w.PodWorkloads(c.Name, nil) == 0
		}
		if others := e.onNetwork(w, c); others > 0 {
			// The network stays: its capacity falls back to the clusters left on it.
			return int(w.SplitHorizonOf(c.Network, IsScaleService).Capacity) == e.Scale.Pods*others
		}
		return w.SplitHorizonFor(c.Network).Workloads == 0
	}
}

// SameAs says whether a watcher holds what ref holds of c: for another network its split-horizon
// workloads, capacity and gateways; for the same network its pod workloads.
func (e Expect) SameAs(ref *xdswatch.Watcher, c *cluster.Cluster) func(*xdswatch.Watcher) bool {
	return func(w *xdswatch.Watcher) bool {
		if e.RelationTo(w, c) == topology.SameNetwork {
			return w.PodWorkloads(c.Name, nil) == ref.PodWorkloads(c.Name, nil)
		}
		a, b := w.SplitHorizonFor(c.Network), ref.SplitHorizonFor(c.Network)
		return a.Workloads == b.Workloads && a.Capacity == b.Capacity && maps.Equal(a.Gateways, b.Gateways)
	}
}

// IsScaleService keeps the scale workloads' services, by their "ns/hostname" key: not the probe
// services the data-plane suites add, nor the waypoints -waypoints puts beside the scale services
// (global too, as Istio's docs make them).
func IsScaleService(key string) bool {
	ns, host, _ := strings.Cut(key, "/")
	name, _, _ := strings.Cut(host, ".")
	n, err := strconv.Atoi(strings.TrimPrefix(name, strings.TrimSuffix(workload.ServiceName(0), "0")))
	return ns != workload.ProbeNamespace && err == nil && workload.ServiceName(n) == name
}
