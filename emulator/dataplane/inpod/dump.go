package inpod

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"istio.io/istio/pkg/workloadapi"
)

// Dump is ztunnel's /config_dump as far as the emulator holds it: the workloads and services
// istiod sent, and empty policies and staged services, in ztunnel's JSON (src/admin.rs ConfigDump
// with src/state.rs ProxyStateSerialization flattened into it; framework/realfmt cites every
// field and checks this output against them). istioctl's ztunnel-config reader and the kube
// probes read it as they read ztunnel's. What ztunnel adds beside (staticConfig, version, config,
// certificates, workloadState) is left out.
type Dump struct {
	Workloads      []*Workload                     `json:"workloads"`
	Services       []*Service                      `json:"services"`
	Policies       []any                           `json:"policies"`
	StagedServices map[string]map[string]*Endpoint `json:"stagedServices"`
}

// Workload is ztunnel's Workload (src/state/workload.rs:229-293): the keys ztunnel skips when
// empty are omitempty here.
type Workload struct {
	WorkloadIPs           []string        `json:"workloadIps"`
	Waypoint              *GatewayAddress `json:"waypoint,omitempty"`
	NetworkGateway        *GatewayAddress `json:"networkGateway,omitempty"`
	Protocol              string          `json:"protocol"`
	NetworkMode           string          `json:"networkMode"`
	UID                   string          `json:"uid,omitempty"`
	Name                  string          `json:"name"`
	Namespace             string          `json:"namespace"`
	TrustDomain           string          `json:"trustDomain,omitempty"`
	ServiceAccount        string          `json:"serviceAccount,omitempty"`
	Network               string          `json:"network,omitempty"`
	WorkloadName          string          `json:"workloadName,omitempty"`
	WorkloadType          string          `json:"workloadType,omitempty"`
	CanonicalName         string          `json:"canonicalName,omitempty"`
	CanonicalRevision     string          `json:"canonicalRevision,omitempty"`
	Hostname              string          `json:"hostname,omitempty"`
	Node                  string          `json:"node,omitempty"`
	AuthorizationPolicies []string        `json:"authorizationPolicies,omitempty"`
	Status                string          `json:"status"`
	ClusterID             string          `json:"clusterId"`
	Locality              *Locality       `json:"locality,omitempty"`
	Services              []string        `json:"services,omitempty"`
	Capacity              uint32          `json:"capacity"`
}

// GatewayAddress is ztunnel's (src/state/workload.rs:164-179): the destination is "network/ip"
// or "namespace/hostname".
type GatewayAddress struct {
	Destination   string `json:"destination"`
	HboneMtlsPort uint32 `json:"hboneMtlsPort"`
}

// Locality is ztunnel's (src/state/workload.rs:138-143), written only when one part is set.
type Locality struct {
	Region  string `json:"region"`
	Zone    string `json:"zone"`
	Subzone string `json:"subzone"`
}

// Service is ztunnel's Service (src/state/service.rs:36-76), without the load balancer and
// waypoints, which the emulator does not write.
type Service struct {
	Name            string               `json:"name"`
	Namespace       string               `json:"namespace"`
	Hostname        string               `json:"hostname"`
	Vips            []string             `json:"vips"`
	Ports           map[string]uint32    `json:"ports"`
	Endpoints       map[string]*Endpoint `json:"endpoints"`
	SubjectAltNames []string             `json:"subjectAltNames"`
	IPFamilies      string               `json:"ipFamilies,omitempty"`
	Canonical       bool                 `json:"canonical"`
	Visibility      string               `json:"visibility"`
}

// Endpoint is ztunnel's (src/state/service.rs:337-348), keyed by workload UID in its service.
type Endpoint struct {
	WorkloadUID string            `json:"workloadUid"`
	Port        map[string]uint32 `json:"port"`
	Status      string            `json:"status"`
}

// ConfigDump is the part of ztunnel's /config_dump that istioctl's ztunnel-config reader and the
// probes read (workloads and services), built from what istiod sent as ztunnel builds its state
// from it (src/state/workload.rs TryFrom<XdsWorkload>, src/state/service.rs).
func ConfigDump(addrs map[string]*workloadapi.Address) *Dump {
	d := &Dump{Workloads: []*Workload{}, Services: []*Service{}, Policies: []any{}, StagedServices: map[string]map[string]*Endpoint{}}
	services := map[string]*Service{}
	allowAll := map[string]bool{} // services that keep unhealthy endpoints
	for _, a := range addrs {
		s := a.GetService()
		if s == nil {
			continue
		}
		zs := &Service{Name: s.GetName(), Namespace: s.GetNamespace(), Hostname: s.GetHostname(), Vips: []string{},
			Ports: map[string]uint32{}, Endpoints: map[string]*Endpoint{}, SubjectAltNames: append([]string{}, s.GetSubjectAltNames()...),
			IPFamilies: ipFamilies(s.GetIpFamilies()), Canonical: s.GetCanonical(), Visibility: "Public"}
		if s.GetVisibility() == workloadapi.Service_NAMESPACE {
			zs.Visibility = "Namespace"
		}
		for _, na := range s.GetAddresses() {
			if ip, ok := netip.AddrFromSlice(na.GetAddress()); ok {
				zs.Vips = append(zs.Vips, na.GetNetwork()+"/"+ip.String())
			}
		}
		for _, p := range s.GetPorts() {
			zs.Ports[fmt.Sprint(p.GetServicePort())] = p.GetTargetPort()
		}
		key := s.GetNamespace() + "/" + s.GetHostname()
		services[key] = zs
		allowAll[key] = s.GetLoadBalancing().GetHealthPolicy() == workloadapi.LoadBalancing_ALLOW_ALL
		d.Services = append(d.Services, zs)
	}
	for _, a := range addrs {
		w := a.GetWorkload()
		if w == nil {
			continue
		}
		zw := &Workload{WorkloadIPs: []string{}, Protocol: "TCP", NetworkMode: "Standard", UID: w.GetUid(), Name: w.GetName(), Namespace: w.GetNamespace(),
			TrustDomain: or(w.GetTrustDomain(), "cluster.local"), ServiceAccount: or(w.GetServiceAccount(), "default"), Network: w.GetNetwork(),
			WorkloadName: w.GetWorkloadName(), WorkloadType: strings.ToLower(w.GetWorkloadType().String()), CanonicalName: w.GetCanonicalName(),
			CanonicalRevision: w.GetCanonicalRevision(), Hostname: w.GetHostname(), Node: w.GetNode(), AuthorizationPolicies: w.GetAuthorizationPolicies(),
			Status: status(w.GetStatus()), ClusterID: or(w.GetClusterId(), "Kubernetes"), Capacity: 1}
		if w.GetTunnelProtocol() == workloadapi.TunnelProtocol_HBONE {
			zw.Protocol = "HBONE"
		}
		if w.GetNetworkMode() == workloadapi.NetworkMode_HOST_NETWORK {
			zw.NetworkMode = "HostNetwork"
		}
		if c := w.GetCapacity(); c != nil {
			zw.Capacity = c.GetValue()
		}
		if l := w.GetLocality(); l.GetRegion() != "" || l.GetZone() != "" || l.GetSubzone() != "" {
			zw.Locality = &Locality{Region: l.GetRegion(), Zone: l.GetZone(), Subzone: l.GetSubzone()}
		}
		for _, b := range w.GetAddresses() {
			if ip, ok := netip.AddrFromSlice(b); ok {
				zw.WorkloadIPs = append(zw.WorkloadIPs, ip.String())
			}
		}
		zw.Waypoint = gatewayAddress(w.GetWaypoint())
		zw.NetworkGateway = gatewayAddress(w.GetNetworkGateway())
		d.Workloads = append(d.Workloads, zw)
		for key, pl := range w.GetServices() {
			zw.Services = append(zw.Services, key)
			ep := &Endpoint{WorkloadUID: w.GetUid(), Port: map[string]uint32{}, Status: zw.Status}
			for _, p := range pl.GetPorts() {
				ep.Port[fmt.Sprint(p.GetServicePort())] = p.GetTargetPort()
			}
			zs := services[key]
			switch {
			case zs == nil:
				// Endpoints of a service not (yet) received wait as staged services, as in ztunnel
				// (src/state/service.rs:654-671).
				if d.StagedServices[key] == nil {
					d.StagedServices[key] = map[string]*Endpoint{}
				}
				d.StagedServices[key][w.GetUid()] = ep
			case ep.Status == "Healthy" || allowAll[key]:
				// ztunnel keeps an unhealthy endpoint out of its service unless the service's
				// health policy is AllowAll (src/state/service.rs:310-317, 640-643).
				zs.Endpoints[w.GetUid()] = ep
			}
		}
		sort.Strings(zw.Services)
	}
	sort.Slice(d.Workloads, func(i, j int) bool { return d.Workloads[i].UID < d.Workloads[j].UID })
	sort.Slice(d.Services, func(i, j int) bool { return d.Services[i].Hostname < d.Services[j].Hostname })
	return d
}

// gatewayAddress is ztunnel's spelling of a waypoint or network gateway address (nil for none).
func gatewayAddress(gw *workloadapi.GatewayAddress) *GatewayAddress {
	if gw == nil {
		return nil
	}
	out := &GatewayAddress{HboneMtlsPort: gw.GetHboneMtlsPort()}
	switch {
	case gw.GetHostname() != nil:
		out.Destination = gw.GetHostname().GetNamespace() + "/" + gw.GetHostname().GetHostname()
	case gw.GetAddress() != nil:
		ip, ok := netip.AddrFromSlice(gw.GetAddress().GetAddress())
		if !ok {
			return nil
		}
		out.Destination = gw.GetAddress().GetNetwork() + "/" + ip.String()
	default:
		return nil
	}
	return out
}

// ipFamilies is ztunnel's IpFamily of a service ("" for AUTOMATIC, which ztunnel does not write:
// src/state/service.rs:240-249).
func ipFamilies(f workloadapi.IPFamilies) string {
	switch f {
	case workloadapi.IPFamilies_IPV4_ONLY:
		return "IPv4"
	case workloadapi.IPFamilies_IPV6_ONLY:
		return "IPv6"
	case workloadapi.IPFamilies_DUAL:
		return "Dual"
	}
	return ""
}

// status is ztunnel's spelling of a workload status.
func status(s workloadapi.WorkloadStatus) string {
	if s == workloadapi.WorkloadStatus_HEALTHY {
		return "Healthy"
	}
	return "Unhealthy"
}

// or is s, or def when s is empty: ztunnel's defaults for an empty trust domain, service
// account and cluster ID (src/state/workload.rs:484-499, 523-530).
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
