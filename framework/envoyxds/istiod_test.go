package envoyxds_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/envoyxds"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// On a real API server and a real istiod: the east-west Gateway's proxy, connected as its pod's
// Envoy would, is served what istiod builds for an east-west gateway: listeners (HBONE on 15008
// and the inner-tunnel one), clusters, their endpoints, and the workloads its metadata discovery
// asks for.
func TestIstiodProgramsTheEastWestGatewaysProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and istiod")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cache, err := bins.Default()
	require.NoError(t, err)
	if missing, err := cache.Missing(bins.PilotDiscovery); err != nil || len(missing) > 0 {
		t.Skipf("pilot-discovery not built (%v %v): run `make bins`", missing, err)
	}
	paths, err := cache.Ensure(ctx, bins.PilotDiscovery)
	require.NoError(t, err)
	_, cs := localtest.Clusters(t, 1)
	c := cs[0]
	root, err := bins.SourceRoot()
	require.NoError(t, err)
	set, err := crds.Load(ctx, root)
	require.NoError(t, err)
	require.NoError(t, crds.Apply(ctx, c.Dynamic, set))
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))
	gw, err := topology.GatewayIP(c.Index)
	require.NoError(t, err)
	require.NoError(t, mesh.EnsureEastWestGateway(ctx, c, gw.String()))
	_, err = workload.Deploy(ctx, c, workload.Scale{Name: "t", Services: 2, Pods: 2, Namespaces: 1, Nodes: 1}, nil)
	require.NoError(t, err)

	mroot, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := mroot.NewIntermediate(c.Name)
	require.NoError(t, err)
	istiod, err := hostistiod.Start(ctx, c, cluster.IstiodOptions{CA: mesh.CACertsOf(inter), Binary: paths[bins.PilotDiscovery], Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = istiod.Stop() })

	cert, err := inter.Issue(mesh.SystemNamespace, mesh.EastWestGateway, 0)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "cert")
	require.NoError(t, cert.WriteDir(dir))
	pod := envoyxds.Pod{Kind: envoyxds.EastWest, Cluster: c.Name, Network: c.Network, Namespace: mesh.SystemNamespace,
		Gateway: mesh.EastWestGateway, Labels: mesh.GatewayPodLabels(mesh.NewEastWestGateway(c.Network), c.Network),
		Name: mesh.EastWestGateway + "-0", IP: gw.String()}
	client, err := envoyxds.Start(ctx, envoyxds.Config{Address: istiod.XDSAddress(), CertDir: dir, Pod: pod}, time.Minute)
	require.NoError(t, err)
	t.Cleanup(client.Close)

	require.Eventually(t, func() bool { h := client.Held(); return h["lds"] > 0 && h["cds"] > 0 && h["eds"] > 0 && h["wds"] > 0 }, 30*time.Second, 100*time.Millisecond,
		"istiod programs the east-west gateway: held %v, counts %v", client.Held(), client.Counts())
	t.Logf("held %v; counts %v", client.Held(), client.Counts())
	assert.True(t, client.Holds("lds", "connect_terminate"), "the HBONE listener on 15008")
	// istiod builds it only for a proxy it takes for an east-west gateway (waypoints get
	// connect_originate instead: pilot/pkg/networking/core/listener_waypoint.go buildWaypointInbound).
	assert.True(t, client.Holds("lds", "forward_inner_connect"), "the east-west gateway's inner-tunnel listener")
	assert.False(t, client.Holds("lds", "connect_originate"))
	served, err := mesh.SamplerOf(istiod.Endpoints()).Clients(ctx)
	require.NoError(t, err)
	assert.Equal(t, measure.Clients{measure.ClientEastWest: 1}, served, "istiod lists it as the east-west gateway")
	counts := client.Counts()
	for _, typ := range []string{"cds", "lds", "wds"} {
		assert.Positive(t, counts[typ].Pushes, "%s pushes", typ)
		assert.Positive(t, counts[typ].Bytes, "%s bytes", typ)
	}
}
