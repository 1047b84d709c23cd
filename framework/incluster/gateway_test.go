package incluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/topology"
)

// Create reads each cluster's ClusterIP range from the API server, so that an east-west gateway
// address inside it is refused (install.EastWestAddress).
func TestCreateReadsTheServiceRangeOnRealAPIServer(t *testing.T) {
	t.Parallel() // each on its own local cluster; most of the time is waiting on it
	cs := localClusters(t, 1)
	topo := kubeTopology(t, cs, nil)
	p := newProvider(t, false)
	p.checked = topo // a local cluster fails preflight (fake nodes only, loopback server)
	kcs, err := p.Create(context.Background(), topo)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background()) })
	want, err := topology.ServiceCIDR(cs[0].Index)
	require.NoError(t, err)
	assert.Equal(t, want, kcs[0].Addresses.Services, "the range the API server was started with (--service-cluster-ip-range)")
}
