package proxies_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/bins/binstest"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/envoyxds"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
	"github.com/ambientmc/ambientmc/framework/proxies"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// On a local cluster with a real istiod: the east-west gateway's proxy, connected as its pod's
// Envoy would, is served what istiod builds for an east-west gateway (listeners, clusters, their
// endpoints, and the workloads its metadata discovery asks for); the waypoint deployed as Istio's
// multicluster docs do (the local provider writing the pod istiod would have deployed) is
// programmed as a waypoint; istiod lists one of each.
func TestIstiodProgramsTheGatewayAndTheWaypoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and istiod")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pilot := binstest.PilotDiscovery(t, ctx)
	p, cs := localtest.Clusters(t, 1)
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
	istiod, err := hostistiod.Start(ctx, c, cluster.IstiodOptions{CA: mesh.CACertsOf(inter), Binary: pilot, Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = istiod.Stop() })
	m := &mesh.Mesh{Intermediates: map[string]*pki.Intermediate{c.Name: inter}, Istiods: map[string]*mesh.Istiod{c.Name: mesh.Observe(istiod)}}

	s := proxies.New(m, p, t.TempDir())
	t.Cleanup(s.Close)
	require.NoError(t, s.ConnectEastWest(ctx, c))
	gateways := s.Of(c.Name, envoyxds.EastWest)
	require.Len(t, gateways, 1)
	ew := gateways[0]
	require.Eventually(t, func() bool { h := ew.Held(); return h["lds"] > 0 && h["cds"] > 0 && h["eds"] > 0 && h["wds"] > 0 }, 30*time.Second, 100*time.Millisecond,
		"istiod programs the east-west gateway: held %v", ew.Held())
	t.Logf("east-west gateway: held %v, counts %v", ew.Held(), ew.Counts())
	assert.True(t, ew.Holds("lds", "connect_terminate"), "the HBONE listener on 15008")
	// istiod builds it only for a proxy it takes for an east-west gateway; waypoints get
	// connect_originate instead (pilot/pkg/networking/core/listener_waypoint.go buildWaypointInbound).
	assert.True(t, ew.Holds("lds", "forward_inner_connect"), "the east-west gateway's inner-tunnel listener")
	assert.False(t, ew.Holds("lds", "connect_originate"))
	for _, typ := range []string{"cds", "lds", "eds", "wds"} {
		assert.Positive(t, ew.Counts()[typ].Pushes, "%s pushes", typ)
		assert.Positive(t, ew.Counts()[typ].Bytes, "%s bytes", typ)
	}

	ns := workload.NamespaceName(0)
	require.NoError(t, s.DeployWaypoint(ctx, c, ns, true))

	waypoints := s.Of(c.Name, envoyxds.Waypoint)
	require.Len(t, waypoints, 1)
	wp := waypoints[0]
	require.Eventually(t, func() bool { h := wp.Held(); return h["lds"] > 0 && h["cds"] > 0 && h["eds"] > 0 }, 30*time.Second, 100*time.Millisecond,
		"istiod programs the waypoint: held %v", wp.Held())
	t.Logf("waypoint: held %v, counts %v", wp.Held(), wp.Counts())
	assert.True(t, wp.Holds("lds", "connect_originate"), "the waypoint's HBONE originate listener")
	assert.False(t, wp.Holds("lds", "forward_inner_connect"))
	assert.True(t, wp.Holds("cds", "inbound-vip|80|http|svc-0.scale-0.svc.cluster.local") || wp.Holds("cds", "inbound-vip|80|tcp|svc-0.scale-0.svc.cluster.local"),
		"a cluster for a service that uses the waypoint")

	nsObj, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, mesh.WaypointName, nsObj.Labels[mesh.UseWaypointLabel])
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, mesh.WaypointName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", svc.Labels[workload.GlobalLabel])
	require.Eventually(t, func() bool {
		served, err := mesh.SamplerOf(istiod.Endpoints()).Clients(ctx)
		return err == nil && served[measure.ClientWaypoint] == 1 && served[measure.ClientEastWest] == 1
	}, 10*time.Second, 100*time.Millisecond, "istiod lists one waypoint and one east-west gateway")
}
