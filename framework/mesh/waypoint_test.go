package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

func gatewayPod(name string, phase corev1.PodPhase, ip string, deleting bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "scale-0", Labels: map[string]string{GatewayNameLabel: WaypointName, "pod-template-hash": "abc"}},
		Spec: corev1.PodSpec{NodeName: "kind-worker", Containers: []corev1.Container{{Name: "istio-proxy",
			Env: []corev1.EnvVar{{Name: "ISTIO_META_MESH_ID", Value: "mesh1"}}}}},
		Status: corev1.PodStatus{Phase: phase, PodIP: ip},
	}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

// The pod istiod deployed for a gateway is the running, addressed one that is not going away,
// with the labels and the mesh ID its proxy presents.
func TestWaitGatewayPodTakesTheRunningOne(t *testing.T) {
	c := &cluster.Cluster{Cluster: topology.Cluster{Name: "c1"}, Client: fake.NewClientset(
		gatewayPod("waypoint-a", corev1.PodPending, "", false),
		gatewayPod("waypoint-b", corev1.PodRunning, "10.244.1.5", true),
		gatewayPod("waypoint-c", corev1.PodRunning, "10.244.1.6", false),
	)}
	got, err := WaitGatewayPod(context.Background(), c, "scale-0", WaypointName, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, cluster.GatewayPod{Name: "waypoint-c", IP: "10.244.1.6", Node: "kind-worker",
		Labels: map[string]string{GatewayNameLabel: WaypointName, "pod-template-hash": "abc"}, MeshID: "mesh1"}, got)

	none := &cluster.Cluster{Cluster: topology.Cluster{Name: "c2"}, Client: fake.NewClientset(gatewayPod("waypoint-a", corev1.PodPending, "", false))}
	_, err = WaitGatewayPod(context.Background(), none, "scale-0", WaypointName, time.Second)
	require.ErrorContains(t, err, "no running pod of gateway scale-0/waypoint")
	assert.ErrorContains(t, err, "Pending")
}
