package podenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var chartVars = []string{"ISTIO_META_CLUSTER_ID", "NETWORK", "ISTIO_META_NETWORK", "NODE_NAME", "ISTIO_META_NODE_NAME",
	"POD_NAME", "POD_NAMESPACE", "INSTANCE_IP", "CA_ADDRESS", "CA_ADDR", "XDS_ADDRESS", "TMPDIR"}

func clearEnv(t *testing.T) {
	for _, k := range chartVars {
		t.Setenv(k, "")
	}
}

// ztunnel's chart names the addresses CA_ADDRESS and XDS_ADDRESS; the gateway template CA_ADDR,
// which then serves xDS too.
func TestFromEnvironReadsEitherChart(t *testing.T) {
	clearEnv(t)
	for k, v := range map[string]string{"ISTIO_META_CLUSTER_ID": "cluster-1", "ISTIO_META_NETWORK": "network-1", "ISTIO_META_NODE_NAME": "n1",
		"POD_NAME": "gw-0", "POD_NAMESPACE": "istio-system", "INSTANCE_IP": "10.11.0.7", "CA_ADDR": "istiod.istio-system.svc:15012"} {
		t.Setenv(k, v)
	}
	e, err := FromEnviron()
	require.NoError(t, err)
	assert.Equal(t, Env{Cluster: "cluster-1", Network: "network-1", Node: "n1", Pod: "gw-0", Namespace: "istio-system", IP: "10.11.0.7",
		CAAddress: "istiod.istio-system.svc:15012", XDSAddress: "istiod.istio-system.svc:15012", Dir: "/tmp"}, e)

	t.Setenv("NETWORK", "network-2")
	t.Setenv("XDS_ADDRESS", "xds:15010")
	e, err = FromEnviron()
	require.NoError(t, err)
	assert.Equal(t, "network-2", e.Network)
	assert.Equal(t, "xds:15010", e.XDSAddress)
}

// The error names every missing variable, in one stable order.
func TestFromEnvironNamesWhatIsMissing(t *testing.T) {
	clearEnv(t)
	t.Setenv("POD_NAME", "p")
	for range 5 {
		_, err := FromEnviron()
		require.Error(t, err)
		assert.Equal(t, "podenv: the pod sets no ISTIO_META_CLUSTER_ID, NETWORK or ISTIO_META_NETWORK, POD_NAMESPACE, INSTANCE_IP, CA_ADDRESS or CA_ADDR (Istio's charts set them)", err.Error())
	}
}
