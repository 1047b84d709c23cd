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
