package install

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
)

// setGatewayStatus writes what istiod writes into the east-west Gateway's status: its Programmed
// condition and the addresses it reports.
func setGatewayStatus(t *testing.T, c *cluster.Cluster, programmed, reason string, addrs ...string) {
	t.Helper()
	ctx := context.Background()
	api := c.GatewayAPI.GatewayV1().Gateways(mesh.SystemNamespace)
	gw, err := api.Get(ctx, mesh.EastWestGateway, metav1.GetOptions{})
	require.NoError(t, err)
	ip := gatewayv1.IPAddressType
	gw.Status.Addresses = nil
	for _, a := range addrs {
		gw.Status.Addresses = append(gw.Status.Addresses, gatewayv1.GatewayStatusAddress{Type: &ip, Value: a})
	}
	gw.Status.Conditions = []metav1.Condition{{Type: string(gatewayv1.GatewayConditionProgrammed), Status: metav1.ConditionStatus(programmed),
		Reason: reason, Message: "written by the test as istiod would", LastTransitionTime: metav1.Now()}}
	_, err = api.UpdateStatus(ctx, gw, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// The east-west address on a real API server: the Service's ClusterIP comes from its real
// allocator, and the Gateway's status is what istiod writes while the LoadBalancer is pending
// (Programmed=False, the ClusterIP as address) and once it has an address (Programmed=True).
func TestEastWestAddressOnRealAPIServer(t *testing.T) {
	t.Parallel() // each on its own API server; most of the time is waiting on it
	c := realClusterWith(t, "gateways.gateway.networking.k8s.io")
	ctx := context.Background()
	require.True(t, c.Addresses.Services.IsValid(), "the local provider knows its service range")
	_, err := c.GatewayAPI.GatewayV1().Gateways(mesh.SystemNamespace).Create(ctx, mesh.NewEastWestGateway(c.Network), metav1.CreateOptions{})
	require.NoError(t, err)
	svcs := c.Client.CoreV1().Services(mesh.SystemNamespace)
	svc, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: mesh.EastWestGateway},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"gateway.networking.k8s.io/gateway-name": mesh.EastWestGateway},
			Ports:    []corev1.ServicePort{{Name: "mesh", Port: mesh.HBONEPort, TargetPort: intstr.FromInt32(mesh.HBONEPort)}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	clusterIP := svc.Spec.ClusterIP
	t.Logf("the API server gave the gateway's Service ClusterIP %s (range %s)", clusterIP, c.Addresses.Services)

	t.Run("WaitsOutTheClusterIPUntilProgrammed", func(t *testing.T) {
		setGatewayStatus(t, c, "False", "AddressNotAssigned", clusterIP)
		type result struct {
			addr string
			err  error
		}
		done := make(chan result, 1)
		go func() {
			addr, err := EastWestAddress(ctx, c, 30*time.Second)
			done <- result{addr, err}
		}()
		select {
		case r := <-done:
			t.Fatalf("returned %q, %v while the LoadBalancer was pending: the ClusterIP is not an east-west address", r.addr, r.err)
		case <-time.After(2500 * time.Millisecond):
		}
		// MetalLB assigned an address; istiod replaces the ClusterIP and marks the Gateway Programmed.
		setGatewayStatus(t, c, "True", "Programmed", "172.18.192.1")
		r := <-done
		require.NoError(t, r.err)
		assert.Equal(t, "172.18.192.1", r.addr)
	})

	t.Run("NoLoadBalancerSaysSoWithTheServiceEvents", func(t *testing.T) {
		setGatewayStatus(t, c, "False", "AddressNotAssigned", clusterIP)
		_, err := EastWestAddress(ctx, c, 2*time.Second)
		require.Error(t, err)
		msg := err.Error()
		t.Log(msg)
		assert.Contains(t, msg, "Programmed=False: AddressNotAssigned written by the test as istiod would; status.addresses holds "+clusterIP+", which is not used before Programmed=True")
		assert.Contains(t, msg, "timed out after 2s")
		assert.Contains(t, msg, "Service istio-system/istio-eastwestgateway: type LoadBalancer, ClusterIP "+clusterIP+", 0 LoadBalancer ingress addresses")
		assert.Contains(t, msg, "no LoadBalancer implementation")
		assert.Contains(t, msg, "install MetalLB or use a cloud cluster")

		// An implementation that runs but cannot assign (MetalLB with an exhausted pool) writes an
		// event on the Service: the error carries it instead.
		_, err = c.Client.CoreV1().Events(mesh.SystemNamespace).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: mesh.EastWestGateway + ".alloc"},
			InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: mesh.SystemNamespace, Name: mesh.EastWestGateway},
			Type:           corev1.EventTypeWarning, Reason: "AllocationFailed",
			Message:       `Failed to allocate IP for "istio-system/istio-eastwestgateway": no available IPs`,
			LastTimestamp: metav1.Now(),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = EastWestAddress(ctx, c, time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the LoadBalancer implementation assigned no address; its events:")
		assert.Contains(t, err.Error(), `event Warning Service/istio-eastwestgateway: AllocationFailed: Failed to allocate IP for "istio-system/istio-eastwestgateway": no available IPs`)
		assert.NotContains(t, err.Error(), "no LoadBalancer implementation")
	})

	t.Run("ProgrammedWithAClusterIPIsRefusedAtOnce", func(t *testing.T) {
		// A Service of type ClusterIP gives a Programmed Gateway whose only address is internal.
		setGatewayStatus(t, c, "True", "Programmed", clusterIP)
		start := time.Now()
		_, err := EastWestAddress(ctx, c, 30*time.Second)
		require.Error(t, err)
		assert.Less(t, time.Since(start), 10*time.Second, "refused without waiting out the timeout")
		assert.Contains(t, err.Error(), "Programmed=True, but its address "+clusterIP+" is inside the cluster's service range "+c.Addresses.Services.String())

		// Without the range (a kube cluster whose provider cannot know it), the Service's own
		// ClusterIP gives it away.
		noRange := *c
		noRange.Addresses.Services = netip.Prefix{}
		_, err = EastWestAddress(ctx, &noRange, 30*time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is the ClusterIP of Service istio-system/istio-eastwestgateway")
	})
}
