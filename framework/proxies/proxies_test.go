package proxies_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/bins"
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

// On a local cluster with a real istiod: the waypoint deployed as Istio's multicluster docs do
// (the local provider writing the pod istiod would have deployed) is programmed by istiod as a
// waypoint, beside the east-west gateway's proxy, and istiod lists both.
func TestIstiodProgramsTheWaypointAndTheGateway(t *testing.T) {
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
	istiod, err := hostistiod.Start(ctx, c, cluster.IstiodOptions{CA: mesh.CACertsOf(inter), Binary: paths[bins.PilotDiscovery], Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = istiod.Stop() })
	m := &mesh.Mesh{Intermediates: map[string]*pki.Intermediate{c.Name: inter}, Istiods: map[string]*mesh.Istiod{c.Name: mesh.Observe(istiod)}}

	s := proxies.New(m, p, t.TempDir())
	t.Cleanup(s.Close)
	require.NoError(t, s.ConnectEastWest(ctx, c))
	ns := workload.NamespaceName(0)
	require.NoError(t, s.DeployWaypoint(ctx, c, ns, true))

	waypoints := s.Of(c.Name, envoyxds.Waypoint)
	require.Len(t, waypoints, 1)
	wp := waypoints[0]
	require.Eventually(t, func() bool { h := wp.Held(); return h["lds"] > 0 && h["cds"] > 0 && h["eds"] > 0 }, 30*time.Second, 100*time.Millisecond,
		"istiod programs the waypoint: held %v", wp.Held())
	t.Logf("waypoint: held %v, counts %v", wp.Held(), wp.Counts())
	// A waypoint originates HBONE; only an east-west gateway forwards inner tunnels
	// (pilot/pkg/networking/core/listener_waypoint.go buildWaypointInbound).
	assert.True(t, wp.Holds("lds", "connect_originate"), "the waypoint's HBONE originate listener")
	assert.False(t, wp.Holds("lds", "forward_inner_connect"))
	assert.True(t, wp.Holds("cds", "inbound-vip|80|http|svc-0.scale-0.svc.cluster.local") || wp.Holds("cds", "inbound-vip|80|tcp|svc-0.scale-0.svc.cluster.local"),
		"a cluster for a service that uses the waypoint")
	require.Len(t, s.Of(c.Name, envoyxds.EastWest), 1)

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
