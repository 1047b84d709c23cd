package measure

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"istio.io/istio/pkg/util/protomarshal"
	"istio.io/istio/pkg/workloadapi"
)

// The answer is marshalled as istiod's ambientz does (protomarshal.Marshal of each workload), so
// the reader meets the field names and the omitted zero status of the real endpoint.
func TestAmbientzOf(t *testing.T) {
	svc := "probe/echo-peer.probe.svc.cluster.local"
	workloads := []*workloadapi.Workload{
		{Uid: "cluster-3//Pod/probe/echo-peer-0", ClusterId: "cluster-3", Network: "network-1",
			Services: map[string]*workloadapi.PortList{svc: {}}},
		{Uid: "cluster-1//Pod/probe/echo-local-0", ClusterId: "cluster-1", Network: "network-1",
			Status: workloadapi.WorkloadStatus_UNHEALTHY, Services: map[string]*workloadapi.PortList{svc: {}}},
		{Uid: "cluster-1//Pod/probe/client", ClusterId: "cluster-1", Network: "network-1"},
	}
	var parts []string
	for _, w := range workloads {
		b, err := protomarshal.Marshal(w)
		require.NoError(t, err)
		parts = append(parts, string(b))
	}
	body := fmt.Sprintf(`{"workloads":[%s],"services":[],"policies":[]}`, strings.Join(parts, ","))
	i, _ := debugServer(t, AmbientzPath, &body)
	dump, err := i.Ambientz(context.Background())
	require.NoError(t, err)
	assert.Equal(t, body, string(dump.Raw), "the whole answer is kept")
	assert.Equal(t, "serving "+svc+": cluster-1//Pod/probe/echo-local-0 in cluster-1/network-1 UNHEALTHY, "+
		"cluster-3//Pod/probe/echo-peer-0 in cluster-3/network-1 HEALTHY (workloads per cluster: cluster-1 2, cluster-3 1)", dump.Of(svc))
	assert.Contains(t, dump.Of("probe/none.probe.svc.cluster.local"), "serving probe/none.probe.svc.cluster.local: no workload")

	body = `[]`
	_, err = i.Ambientz(context.Background())
	assert.ErrorContains(t, err, "/debug/ambientz: decoding")
	_, err = (&Sampler{Name: "c1"}).Ambientz(context.Background())
	assert.ErrorContains(t, err, "no debug URL")
}
