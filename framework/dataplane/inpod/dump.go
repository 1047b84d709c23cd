package inpod

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	ztdump "istio.io/istio/istioctl/pkg/writer/ztunnel/configdump"
	"istio.io/istio/pkg/workloadapi"
)

// ConfigDump is the part of ztunnel's /config_dump that istioctl's ztunnel-config reader and the
// probes read (workloads and services), built from what istiod sent, in ztunnel's JSON shape.
func ConfigDump(addrs map[string]*workloadapi.Address) *ztdump.ZtunnelDump {
	d := &ztdump.ZtunnelDump{Workloads: []*ztdump.ZtunnelWorkload{}, Services: []*ztdump.ZtunnelService{}}
	services := map[string]*ztdump.ZtunnelService{}
	for _, a := range addrs {
		s := a.GetService()
		if s == nil {
			continue
		}
		zs := &ztdump.ZtunnelService{Name: s.GetName(), Namespace: s.GetNamespace(), Hostname: s.GetHostname(),
			Ports: map[string]int{}, Endpoints: map[string]*ztdump.ZtunnelEndpoint{}, SubjectAltNames: s.GetSubjectAltNames(), IPFamilies: "IPv4"}
		for _, na := range s.GetAddresses() {
			if ip, ok := netip.AddrFromSlice(na.GetAddress()); ok {
				zs.Addresses = append(zs.Addresses, na.GetNetwork()+"/"+ip.String())
			}
		}
		for _, p := range s.GetPorts() {
			zs.Ports[fmt.Sprint(p.GetServicePort())] = int(p.GetTargetPort())
		}
		services[s.GetNamespace()+"/"+s.GetHostname()] = zs
		d.Services = append(d.Services, zs)
	}
	for _, a := range addrs {
		w := a.GetWorkload()
		if w == nil {
			continue
		}
		zw := &ztdump.ZtunnelWorkload{UID: w.GetUid(), Name: w.GetName(), Namespace: w.GetNamespace(), ServiceAccount: w.GetServiceAccount(),
			WorkloadName: w.GetWorkloadName(), WorkloadType: strings.ToLower(w.GetWorkloadType().String()), CanonicalName: w.GetCanonicalName(),
			CanonicalRevision: w.GetCanonicalRevision(), ClusterID: w.GetClusterId(), TrustDomain: w.GetTrustDomain(), Node: w.GetNode(),
			Network: w.GetNetwork(), Status: status(w.GetStatus()), Hostname: w.GetHostname(), Capacity: 1, Protocol: w.GetTunnelProtocol().String(),
			Locality: ztdump.Locality{Region: w.GetLocality().GetRegion(), Zone: w.GetLocality().GetZone(), Subzone: w.GetLocality().GetSubzone()}}
		if c := w.GetCapacity(); c != nil {
			zw.Capacity = c.GetValue()
		}
		for _, b := range w.GetAddresses() {
			if ip, ok := netip.AddrFromSlice(b); ok {
				zw.WorkloadIPs = append(zw.WorkloadIPs, ip.String())
			}
		}
		if gw := w.GetNetworkGateway(); gw != nil {
			if ip, ok := netip.AddrFromSlice(gw.GetAddress().GetAddress()); ok {
				zw.NetworkGateway = &ztdump.GatewayAddress{Destination: gw.GetAddress().GetNetwork() + "/" + ip.String()}
			}
		}
		d.Workloads = append(d.Workloads, zw)
		for key, pl := range w.GetServices() {
			zs := services[key]
			if zs == nil {
				continue
			}
			ep := &ztdump.ZtunnelEndpoint{WorkloadUID: w.GetUid(), Service: key, Port: map[uint16]uint16{}}
			if len(zw.WorkloadIPs) > 0 {
				ep.Address = w.GetNetwork() + "/" + zw.WorkloadIPs[0]
			}
			for _, p := range pl.GetPorts() {
				ep.Port[uint16(p.GetServicePort())] = uint16(p.GetTargetPort())
			}
			zs.Endpoints[w.GetUid()] = ep
		}
	}
	sort.Slice(d.Workloads, func(i, j int) bool { return d.Workloads[i].UID < d.Workloads[j].UID })
	sort.Slice(d.Services, func(i, j int) bool { return d.Services[i].Hostname < d.Services[j].Hostname })
	return d
}

// status is ztunnel's spelling of a workload status.
func status(s workloadapi.WorkloadStatus) string {
	if s == workloadapi.WorkloadStatus_HEALTHY {
		return "Healthy"
	}
	return "Unhealthy"
}
