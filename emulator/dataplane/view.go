// Package dataplane emulates ztunnel and the east-west gateway for the local provider. Both act
// only on what their cluster's istiod sends over workload xDS, and speak real HBONE and double
// HBONE (emulator/dataplane/hbone) with SPIFFE mTLS, every certificate from that istiod's CA
// (emulator/dataplane/nodecerts). Reports label this data plane "emulated".
package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strings"

	"istio.io/istio/pkg/workloadapi"
	"istio.io/istio/pkg/workloadapi/security"

	"github.com/ambientmc/ambientmc/emulator/dataplane/rbac"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// Service is a service as a ztunnel sees it.
type Service struct {
	Key       string // ns/hostname, the key workloads use
	Hostname  string
	Namespace string
	VIPs      map[string][]netip.Addr // network -> addresses
	Ports     map[uint32]uint32       // service port -> target port
	SANs      []string
	LB        *workloadapi.LoadBalancing
}

// Endpoint is one workload behind a service: a pod with an address on some network, or a
// split-horizon summary of a remote network reached through its gateway.
type Endpoint struct {
	UID         string
	Name        string // the pod's name ("" for split-horizon workloads)
	Namespace   string
	Workload    string     // the workload's owner name (the Deployment), as ztunnel's metrics label it
	Addr        netip.Addr // invalid for split-horizon workloads
	Network     string
	Identity    string
	Node        string
	Cluster     string
	Region      string
	Zone        string
	Subzone     string
	Healthy     bool
	Capacity    uint32
	Ports       map[uint32]uint32 // service port -> target port for this workload
	Gateway     netip.Addr        // network gateway of a split-horizon workload
	GatewayPort uint32
	InServices  int      // how many services the workload serves
	Policies    []string // the authorization policies that name the workload (selector scope)
}

// View is an immutable snapshot of what istiod sent, indexed for routing.
type View struct {
	services  map[string]*Service // by key
	byHost    map[string]*Service
	byVIP     map[networkAddr][]*Service // a VIP is a network's: clusters on two networks can share one
	endpoints map[string][]*Endpoint     // by service key
	byAddr    map[netip.Addr]*Endpoint
	gateways  map[netip.Addr]*Endpoint // network gateway workloads by address
	workloads []*Endpoint              // every workload, for failure messages
	pods      map[podKey]*Endpoint
	policies  *rbac.Store
}

// podKey names a pod across clusters.
type podKey struct{ cluster, namespace, name string }

// BuildView indexes the Address resources a watcher holds (with no authorization policy).
func BuildView(addrs map[string]*workloadapi.Address) *View { return BuildPolicyView(addrs, nil) }

// BuildPolicyView indexes the Address and Authorization resources a watcher holds.
func BuildPolicyView(addrs map[string]*workloadapi.Address, policies map[string]*security.Authorization) *View {
	v := &View{services: map[string]*Service{}, byHost: map[string]*Service{}, byVIP: map[networkAddr][]*Service{}, endpoints: map[string][]*Endpoint{},
		byAddr: map[netip.Addr]*Endpoint{}, gateways: map[netip.Addr]*Endpoint{}, pods: map[podKey]*Endpoint{}, policies: rbac.NewStore(policies)}
	for _, a := range addrs {
		if s := a.GetService(); s != nil {
			svc := &Service{Key: s.GetNamespace() + "/" + s.GetHostname(), Hostname: s.GetHostname(), Namespace: s.GetNamespace(),
				VIPs: map[string][]netip.Addr{}, Ports: map[uint32]uint32{}, SANs: s.GetSubjectAltNames(), LB: s.GetLoadBalancing()}
			for _, na := range s.GetAddresses() {
				if ip, ok := netip.AddrFromSlice(na.GetAddress()); ok {
					svc.VIPs[na.GetNetwork()] = append(svc.VIPs[na.GetNetwork()], ip)
					k := networkAddr{na.GetNetwork(), ip}
					v.byVIP[k] = append(v.byVIP[k], svc)
				}
			}
			for _, p := range s.GetPorts() {
				svc.Ports[p.GetServicePort()] = p.GetTargetPort()
			}
			v.services[svc.Key] = svc
			v.byHost[svc.Hostname] = svc
		}
	}
	for name, a := range addrs {
		w := a.GetWorkload()
		if w == nil {
			continue
		}
		ep := &Endpoint{UID: w.GetUid(), Name: w.GetName(), Namespace: w.GetNamespace(), Workload: w.GetWorkloadName(),
			Network: w.GetNetwork(), Node: w.GetNode(), Cluster: w.GetClusterId(),
			Identity: identity(w), Healthy: w.GetStatus() == workloadapi.WorkloadStatus_HEALTHY, Capacity: 1,
			Region: w.GetLocality().GetRegion(), Zone: w.GetLocality().GetZone(), Subzone: w.GetLocality().GetSubzone(), InServices: len(w.GetServices()),
			Policies: w.GetAuthorizationPolicies()}
		v.workloads = append(v.workloads, ep)
		if ep.Name != "" {
			v.pods[podKey{ep.Cluster, ep.Namespace, ep.Name}] = ep
		}
		if c := w.GetCapacity(); c != nil {
			ep.Capacity = c.GetValue()
		}
		if len(w.GetAddresses()) > 0 {
			ep.Addr, _ = netip.AddrFromSlice(w.GetAddresses()[0])
			v.byAddr[ep.Addr] = ep
		}
		if gw := w.GetNetworkGateway(); gw != nil {
			ep.Gateway, _ = netip.AddrFromSlice(gw.GetAddress().GetAddress())
			ep.GatewayPort = gw.GetHboneMtlsPort()
		}
		if strings.HasPrefix(name, "NetworkGateway/") && ep.Addr.IsValid() {
			v.gateways[ep.Addr] = ep
		}
		for key, pl := range w.GetServices() {
			ports := map[uint32]uint32{}
			for _, p := range pl.GetPorts() {
				ports[p.GetServicePort()] = p.GetTargetPort()
			}
			e := *ep
			e.Ports = ports
			v.endpoints[key] = append(v.endpoints[key], &e)
		}
	}
	return v
}

// identity is the workload's SPIFFE ID; istiod omits the trust domain when it is cluster.local.
func identity(w *workloadapi.Workload) string {
	td := w.GetTrustDomain()
	if td == "" {
		td = pki.TrustDomain
	}
	return fmt.Sprintf("spiffe://%s/ns/%s/sa/%s", td, w.GetNamespace(), w.GetServiceAccount())
}

// networkAddr is an address on one network, as ztunnel keys services and workloads.
type networkAddr struct {
	network string
	ip      netip.Addr
}

// ServiceByVIP returns the service at ip on network, as ztunnel's get_best_by_vip picks it
// (istio/ztunnel 62d8265 src/state/service.rs): of several services sharing the address, one in
// the client's namespace ns first, else the first by hostname. ztunnel's visibility filter
// (exportTo) and CIDR VIPs are not followed.
func (v *View) ServiceByVIP(network string, ip netip.Addr, ns string) *Service {
	svcs := v.byVIP[networkAddr{network, ip}]
	var best *Service
	for _, s := range svcs {
		switch {
		case best == nil,
			s.Namespace == ns && best.Namespace != ns,
			(s.Namespace == ns) == (best.Namespace == ns) && s.Hostname < best.Hostname:
			best = s
		}
	}
	return best
}

// ServiceByHostname returns the service whose hostname is host.
func (v *View) ServiceByHostname(host string) *Service { return v.byHost[host] }

// Services lists every service.
func (v *View) Services() []*Service {
	out := make([]*Service, 0, len(v.services))
	for _, s := range v.services {
		out = append(out, s)
	}
	return out
}

// Endpoints lists the endpoints of a service.
func (v *View) Endpoints(s *Service) []*Endpoint { return v.endpoints[s.Key] }

// WorkloadByAddr returns the workload holding ip.
func (v *View) WorkloadByAddr(ip netip.Addr) *Endpoint { return v.byAddr[ip] }

// WorkloadsPerCluster says how many workloads the view holds of each cluster, for failure messages.
func (v *View) WorkloadsPerCluster() string {
	perCluster := map[string]int{}
	for _, ep := range v.workloads {
		perCluster[ep.Cluster]++
	}
	parts := make([]string, 0, len(perCluster))
	for c, n := range perCluster {
		parts = append(parts, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(parts)
	return "workloads per cluster: " + strings.Join(parts, ", ")
}

// Pod returns the workload of pod ns/name in cluster, or nil.
func (v *View) Pod(cluster, ns, name string) *Endpoint { return v.pods[podKey{cluster, ns, name}] }

// Gateway returns the network gateway workload at ip (its identity is what the outer tunnel checks).
func (v *View) Gateway(ip netip.Addr) *Endpoint { return v.gateways[ip] }

// TargetPort maps a service port to the endpoint's port: the workload's own mapping first, then
// the service's.
func (s *Service) TargetPort(ep *Endpoint, port uint32) uint32 {
	if t, ok := ep.Ports[port]; ok && t != 0 {
		return t
	}
	if t, ok := s.Ports[port]; ok && t != 0 {
		return t
	}
	return port
}

// Pick chooses an endpoint for a connection from src to port of s as ztunnel does (istio/ztunnel
// 62d8265 src/state.rs load_balance, src/state/service.rs should_include_endpoint): healthy
// endpoints, or every one where the service's policy allows all; none without an address unless
// it is reachable through its network's gateway from another network; none that serves no target
// port for port; with a load-balancing mode, endpoints are ranked by the routing preferences they
// share with the source in order (a leading NETWORK preference that does not match is skipped, and
// one that matches outranks every other match), FAILOVER keeping the best rank present and STRICT
// only endpoints matching all; within the chosen set the choice is random, weighted by capacity
// (a split-horizon workload stands for `capacity` endpoints behind its gateway).
func (v *View) Pick(s *Service, src *Endpoint, port uint32, r *rand.Rand) (*Endpoint, error) {
	target, ok := s.Ports[port]
	if !ok {
		return nil, fmt.Errorf("service %s has no port %d", s.Hostname, port)
	}
	allowAll := s.LB != nil && s.LB.GetHealthPolicy() == workloadapi.LoadBalancing_ALLOW_ALL
	var candidates []*Endpoint
	for _, ep := range v.endpoints[s.Key] {
		if !ep.Healthy && !allowAll {
			continue
		}
		if !ep.Addr.IsValid() && (!ep.Gateway.IsValid() || (src != nil && src.Network == ep.Network)) {
			continue // only its network's gateway reaches it, and never from inside that network
		}
		if _, mapped := ep.Ports[port]; target == 0 && !mapped {
			continue // it serves no target port for this service port
		}
		candidates = append(candidates, ep)
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("service %s has no healthy endpoints", s.Hostname)
	}
	if s.LB != nil && src != nil && s.LB.GetMode() != workloadapi.LoadBalancing_UNSPECIFIED_MODE && s.LB.GetMode() != workloadapi.LoadBalancing_PASSTHROUGH {
		prefs := s.LB.GetRoutingPreference()
		best := -1
		var ranked []*Endpoint
		for _, ep := range candidates {
			rank, all := matching(prefs, src, ep)
			if s.LB.GetMode() == workloadapi.LoadBalancing_STRICT && !all {
				continue
			}
			switch {
			case rank > best:
				best, ranked = rank, []*Endpoint{ep}
			case rank == best:
				ranked = append(ranked, ep)
			}
		}
		if len(ranked) == 0 {
			return nil, fmt.Errorf("service %s has no endpoint matching its strict routing preferences", s.Hostname)
		}
		candidates = ranked
	}
	var total uint64
	for _, ep := range candidates {
		total += uint64(max(ep.Capacity, 1))
	}
	n := r.Uint64N(total)
	for _, ep := range candidates {
		c := uint64(max(ep.Capacity, 1))
		if n < c {
			return ep, nil
		}
		n -= c
	}
	return candidates[len(candidates)-1], nil
}

// matching is ep's rank for src under the routing preferences prefs, as ztunnel's load_balance
// ranks it: one per leading preference on which they agree; where NETWORK comes first, a network
// that differs is skipped over and the same network adds the rank of every other preference. all
// says every preference matched (STRICT's test).
func matching(prefs []workloadapi.LoadBalancing_Scope, src, ep *Endpoint) (rank int, all bool) {
	networkFirst := len(prefs) > 0 && prefs[0] == workloadapi.LoadBalancing_NETWORK
	adjust := 0
	for _, p := range prefs {
		var same bool
		switch p {
		case workloadapi.LoadBalancing_REGION:
			same = src.Region == ep.Region
		case workloadapi.LoadBalancing_ZONE:
			same = src.Zone == ep.Zone
		case workloadapi.LoadBalancing_SUBZONE:
			same = src.Subzone == ep.Subzone
		case workloadapi.LoadBalancing_NODE:
			same = src.Node == ep.Node
		case workloadapi.LoadBalancing_CLUSTER:
			same = src.Cluster == ep.Cluster
		case workloadapi.LoadBalancing_NETWORK:
			same = src.Network == ep.Network
			if networkFirst {
				if !same {
					continue // try the other scopes
				}
				adjust = len(prefs) - 1
			}
		default:
			same = false // a scope this build does not know matches nothing
		}
		if !same {
			break
		}
		rank++
	}
	return rank + adjust, rank == len(prefs)
}

// Authorize decides a connection to dst as ztunnel does on its inbound side (rbac): nil allows,
// a *rbac.Denied refuses.
func (v *View) Authorize(dst *Endpoint, c rbac.Conn) error {
	return v.policies.Check(dst.Namespace, dst.Policies, c)
}

// AddressSource is what Follow reads: an xdswatch.Watcher.
type AddressSource interface {
	Addresses() map[string]*workloadapi.Address
	Authorizations() map[string]*security.Authorization
	Changed() <-chan struct{}
	Done() <-chan struct{}
}

var _ AddressSource = (*xdswatch.Watcher)(nil)

// Follow keeps calling apply with a fresh View whenever the watcher's state changes (and once at
// once), until stop is called. Views are built here, off the connection path. The change channel
// is taken before the state is read: taken after, a change landing between the two would be
// missed, and the view would keep an early state until some later change (a client once held 17
// of a cluster's 101 workloads for good, docs/findings.md).
func Follow(w AddressSource, apply func(*View)) (stop func()) {
	changed := w.Changed()
	apply(BuildPolicyView(w.Addresses(), w.Authorizations()))
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-changed:
				changed = w.Changed()
				apply(BuildPolicyView(w.Addresses(), w.Authorizations()))
			case <-w.Done():
				return
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}
