package envoyxds

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	v3 "istio.io/istio/pilot/pkg/xds/v3"

	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/xdscount"
)

type testCA struct {
	root  *pki.Root
	inter *pki.Intermediate
	dir   string
}

// newCA makes a root, the cluster's intermediate and the east-west gateway's identity.
func newCA(t *testing.T) testCA {
	t.Helper()
	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate("cluster-1")
	require.NoError(t, err)
	cert, err := inter.Issue(pki.IstioNamespace, "istio-eastwestgateway", time.Hour)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "cert")
	require.NoError(t, cert.WriteDir(dir))
	return testCA{root: root, inter: inter, dir: dir}
}

func eastWestPod() Pod {
	return Pod{Kind: EastWest, Cluster: "cluster-1", Network: "network-1", Namespace: "istio-system", Gateway: "istio-eastwestgateway",
		Labels: mesh.GatewayPodLabels(mesh.NewEastWestGateway("network-1"), "network-1"), Name: "istio-eastwestgateway-0", IP: "127.201.0.1", NodeName: "node-0"}
}

func startClient(t *testing.T, f *fakeIstiod, c testCA) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := Start(ctx, Config{Address: f.addr, CertDir: c.dir, Pod: eastWestPod()}, 15*time.Second)
	require.NoError(t, err)
	t.Cleanup(client.Close)
	return client
}

// holdsAll waits until the client holds n resources of each type in want.
func holdsAll(t *testing.T, c *Client, want map[string]int) {
	t.Helper()
	require.Eventually(t, func() bool {
		h := c.Held()
		for typ, n := range want {
			if h[typ] != n {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "want %v, holds %v", want, c.Held())
}

// The client subscribes as a waypoint-type Envoy: clusters, listeners and workloads by wildcard,
// then by name only what those name over ADS (not the agent's SDS or another EDS source). It
// presents the pod's node and identity and acknowledges every response.
func TestClientSubscribesAsTheGatewaysEnvoy(t *testing.T) {
	c := newCA(t)
	f := startFakeIstiod(t, "127.0.0.1:0", c.inter, c.root, meshResources())
	client := startClient(t, f, c)
	holdsAll(t, client, map[string]int{"cds": 4, "lds": 1, "eds": 2, "rds": 1, "sds": 1, "wds": 2})

	assert.Equal(t, []string{"inbound-vip|80|http|a.ns.svc.cluster.local", "inbound-vip|80|http|b.ns.svc.cluster.local"}, f.subscribed(v3.EndpointType))
	assert.Equal(t, []string{"http-routes"}, f.subscribed(v3.RouteType))
	assert.Equal(t, []string{"kubernetes://cred"}, f.subscribed(v3.SecretType), "the workload certificate comes from the agent, not istiod")
	f.mu.Lock()
	node, id, sent := f.node, f.peerID, append([]*discovery.DeltaDiscoveryResponse(nil), f.sent...)
	f.mu.Unlock()
	assert.Equal(t, eastWestPod().ID(), node.GetId())
	assert.Equal(t, "istio.io-eastwest-controller", node.GetMetadata().GetFields()["LABELS"].GetStructValue().GetFields()["gateway.istio.io/managed"].GetStringValue())
	assert.Equal(t, pki.SPIFFEID("istio-system", "istio-eastwestgateway"), id, "client-certificate authentication as the gateway's service account")
	require.Eventually(t, func() bool {
		for _, r := range sent {
			if !f.acked(r.GetNonce()) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every response acknowledged")
}

// Counts are what arrived, type by type: each response once, its resources, removals and bytes;
// what the client holds follows adds and removals.
func TestClientCountsEveryPush(t *testing.T) {
	c := newCA(t)
	f := startFakeIstiod(t, "127.0.0.1:0", c.inter, c.root, meshResources())
	client := startClient(t, f, c)
	holdsAll(t, client, map[string]int{"cds": 4, "eds": 2})

	push := f.response(v3.ClusterType, nil, "upstream-tls", "elsewhere")
	f.push <- push
	holdsAll(t, client, map[string]int{"cds": 2})
	require.Eventually(t, func() bool { return f.acked(push.GetNonce()) }, 10*time.Second, 20*time.Millisecond)

	f.mu.Lock()
	want := xdscount.Counts{}
	for _, r := range f.sent {
		typ := v3.GetMetricType(r.GetTypeUrl())
		w := want[typ]
		w.Pushes++
		w.Resources += int64(len(r.GetResources()))
		w.Removed += int64(len(r.GetRemovedResources()))
		w.Bytes += int64(proto.Size(r))
		want[typ] = w
	}
	f.mu.Unlock()
	assert.Equal(t, want, client.Counts())
	assert.Equal(t, int64(2), client.Counts()["cds"].Pushes)
	assert.Equal(t, int64(2), client.Counts()["cds"].Removed)
}

// A broken stream is established again (istiod restarted in place): the new stream's answer is
// what the client holds, and the counts run on.
func TestClientReconnectsAndCountsOn(t *testing.T) {
	c := newCA(t)
	f := startFakeIstiod(t, "127.0.0.1:0", c.inter, c.root, meshResources())
	client := startClient(t, f, c)
	holdsAll(t, client, map[string]int{"cds": 4, "wds": 2})
	before := client.Counts()

	f.server.Stop()
	smaller := meshResources()
	smaller[v3.WorkloadType] = smaller[v3.WorkloadType][:1]
	startFakeIstiod(t, f.addr, c.inter, c.root, smaller)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, client.WaitSynced(ctx, 1))
	holdsAll(t, client, map[string]int{"cds": 4, "wds": 1})
	assert.Equal(t, 1, client.Reconnects())
	since := client.Counts().Since(before)
	assert.Equal(t, int64(1), since["cds"].Pushes, "the new stream's clusters counted on top")
	assert.Equal(t, int64(1), since["wds"].Resources)
}

// A stream that ends before its first answer is one clear error, not a hang.
func TestStartFailsOnAForeignCA(t *testing.T) {
	c := newCA(t)
	other := newCA(t)
	f := startFakeIstiod(t, "127.0.0.1:0", other.inter, other.root, meshResources())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Start(ctx, Config{Address: f.addr, CertDir: c.dir, Pod: eastWestPod()}, 10*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate from the cluster's CA")
}
