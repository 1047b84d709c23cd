package inpod

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
	ztdump "istio.io/istio/istioctl/pkg/writer/ztunnel/configdump"
	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/framework/realfmt"
)

// The dump reads back through istioctl's ztunnel-config reader (what the kube probes and
// `istioctl ztunnel-config` use) with each service's endpoints, their clusters, networks,
// statuses and a split-horizon workload's capacity.
func TestConfigDumpReadsBackThroughIstioctl(t *testing.T) {
	const key = "probe/echo.probe.svc.cluster.local"
	ports := &workloadapi.PortList{Ports: []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}}}
	addrs := map[string]*workloadapi.Address{
		key: {Type: &workloadapi.Address_Service{Service: &workloadapi.Service{Name: "echo", Namespace: "probe", Hostname: "echo.probe.svc.cluster.local",
			Addresses: []*workloadapi.NetworkAddress{{Network: "network-1", Address: []byte{10, 96, 0, 10}}}, Ports: ports.Ports}}},
		"cluster-1//Pod/probe/echo-0": {Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{Uid: "cluster-1//Pod/probe/echo-0",
			Name: "echo-0", Namespace: "probe", Network: "network-1", ClusterId: "cluster-1", Addresses: [][]byte{{10, 244, 0, 5}},
			Status: workloadapi.WorkloadStatus_HEALTHY, Services: map[string]*workloadapi.PortList{key: ports}}}},
		"network-2/SplitHorizonWorkload/x": {Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{Uid: "network-2/SplitHorizonWorkload/x",
			Network: "network-2", ClusterId: "cluster-2", Capacity: wrapperspb.UInt32(3), Status: workloadapi.WorkloadStatus_HEALTHY,
			NetworkGateway: &workloadapi.GatewayAddress{Destination: &workloadapi.GatewayAddress_Address{
				Address: &workloadapi.NetworkAddress{Network: "network-2", Address: []byte{172, 18, 0, 200}}}, HboneMtlsPort: 15008},
			Services: map[string]*workloadapi.PortList{key: ports}}}},
	}
	data, err := json.Marshal(ConfigDump(addrs))
	require.NoError(t, err)
	cw := &ztdump.ConfigWriter{}
	require.NoError(t, cw.Prime(data))
	var buf bytes.Buffer
	cw.Stdout = &buf
	require.NoError(t, cw.PrintWorkloadDump(ztdump.WorkloadFilter{}, "json"))
	var wls []*ztdump.ZtunnelWorkload
	require.NoError(t, json.Unmarshal(buf.Bytes(), &wls))
	byUID := map[string]*ztdump.ZtunnelWorkload{}
	for _, w := range wls {
		byUID[w.UID] = w
	}
	require.Len(t, byUID, 2)
	assert.Equal(t, "Healthy", byUID["cluster-1//Pod/probe/echo-0"].Status)
	assert.Equal(t, []string{"10.244.0.5"}, byUID["cluster-1//Pod/probe/echo-0"].WorkloadIPs)
	sh := byUID["network-2/SplitHorizonWorkload/x"]
	assert.Equal(t, uint32(3), sh.Capacity)
	assert.Equal(t, "cluster-2", sh.ClusterID)
	assert.Equal(t, "network-2/172.18.0.200", sh.NetworkGateway.Destination)

	buf.Reset()
	require.NoError(t, cw.PrintServiceDump(ztdump.ServiceFilter{Namespace: "probe"}, "json"))
	var svcs []*ztdump.ZtunnelService
	require.NoError(t, json.Unmarshal(buf.Bytes(), &svcs))
	require.Len(t, svcs, 1)
	assert.Equal(t, []string{"network-1/10.96.0.10"}, svcs[0].Addresses)
	assert.Len(t, svcs[0].Endpoints, 2, "one endpoint per workload serving it")
	assert.Equal(t, map[uint16]uint16{80: 8080}, svcs[0].Endpoints["cluster-1//Pod/probe/echo-0"].Port)
}

// The dump has ztunnel's keys and values, field by field (realfmt.CheckZtunnelDump cites each
// one in istio/ztunnel's source), and ztunnel's rules for what a service lists: an unhealthy
// workload is no endpoint of a service unless its health policy is AllowAll
// (src/state/service.rs:310-317), and endpoints of a service not received yet are staged.
func TestConfigDumpIsZtunnels(t *testing.T) {
	ports := []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}}
	svc := func(name string, allowAll bool) *workloadapi.Address {
		s := &workloadapi.Service{Name: name, Namespace: "probe", Hostname: name + ".probe.svc.cluster.local", IpFamilies: workloadapi.IPFamilies_IPV4_ONLY,
			Addresses: []*workloadapi.NetworkAddress{{Network: "network-1", Address: []byte{10, 96, 0, 10}}}, Ports: ports}
		if allowAll {
			s.LoadBalancing = &workloadapi.LoadBalancing{HealthPolicy: workloadapi.LoadBalancing_ALLOW_ALL}
		}
		return &workloadapi.Address{Type: &workloadapi.Address_Service{Service: s}}
	}
	wl := func(uid string, st workloadapi.WorkloadStatus, services ...string) *workloadapi.Address {
		w := &workloadapi.Workload{Uid: uid, Name: uid, Namespace: "probe", Network: "network-1", ClusterId: "cluster-1", Addresses: [][]byte{{10, 244, 0, 5}},
			TunnelProtocol: workloadapi.TunnelProtocol_HBONE, WorkloadType: workloadapi.WorkloadType_POD, Status: st, Services: map[string]*workloadapi.PortList{}}
		for _, s := range services {
			w.Services["probe/"+s+".probe.svc.cluster.local"] = &workloadapi.PortList{Ports: ports}
		}
		return &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: w}}
	}
	addrs := map[string]*workloadapi.Address{
		"probe/strict.probe.svc.cluster.local":  svc("strict", false),
		"probe/lenient.probe.svc.cluster.local": svc("lenient", true),
		"cluster-1//Pod/probe/up":               wl("cluster-1//Pod/probe/up", workloadapi.WorkloadStatus_HEALTHY, "strict", "lenient", "later"),
		"cluster-1//Pod/probe/down":             wl("cluster-1//Pod/probe/down", workloadapi.WorkloadStatus_UNHEALTHY, "strict", "lenient"),
	}
	d := ConfigDump(addrs)
	data, err := json.Marshal(d)
	require.NoError(t, err)
	require.NoError(t, realfmt.CheckZtunnelDump(data))

	eps := map[string][]string{}
	for _, s := range d.Services {
		for uid := range s.Endpoints {
			eps[s.Name] = append(eps[s.Name], uid)
		}
	}
	assert.ElementsMatch(t, []string{"cluster-1//Pod/probe/up"}, eps["strict"], "the unhealthy workload is no endpoint")
	assert.ElementsMatch(t, []string{"cluster-1//Pod/probe/up", "cluster-1//Pod/probe/down"}, eps["lenient"], "AllowAll keeps it")
	assert.Contains(t, d.StagedServices["probe/later.probe.svc.cluster.local"], "cluster-1//Pod/probe/up")
	for _, w := range d.Workloads {
		assert.Equal(t, "HBONE", w.Protocol)
		assert.Equal(t, "pod", w.WorkloadType)
		assert.Equal(t, "cluster.local", w.TrustDomain, "ztunnel's default for an empty trust domain")
		assert.Equal(t, "default", w.ServiceAccount, "ztunnel's default for an empty service account")
	}
}
