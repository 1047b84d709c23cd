package mesh

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// TestImagesReadsWhatThePodsRun_FakeClientset: container statuses are a kubelet's, which no
// API server here has, so a fake clientset carries them.
func TestImagesReadsWhatThePodsRun_FakeClientset(t *testing.T) {
	pod := func(name string, labels map[string]string, image, id string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: SystemNamespace, Labels: labels},
			Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Image: image, ImageID: id}}},
		}
	}
	cs := fake.NewClientset(
		pod("istiod-1", map[string]string{"app": "istiod"}, "h/pilot:t", "h/pilot@sha256:aaa"),
		pod("istiod-2", map[string]string{"app": "istiod"}, "h/pilot:t", "h/pilot@sha256:aaa"),
		pod("ztunnel-x", map[string]string{"app": "ztunnel"}, "h/ztunnel:t", "h/ztunnel@sha256:bbb"),
		pod("gw", map[string]string{"gateway.networking.k8s.io/gateway-name": EastWestGateway}, "h/proxyv2:t", "h/proxyv2@sha256:ccc"),
		pod("other", map[string]string{"app": "something-else"}, "x:y", "x@sha256:ddd"),
	)
	imgs, err := Images(context.Background(), []*cluster.Cluster{{Cluster: topology.Cluster{Name: "cluster-1"}, Client: cs}})
	require.NoError(t, err)
	assert.Equal(t, []Image{
		{Cluster: "cluster-1", Component: EastWestGateway, Image: "h/proxyv2:t", ImageID: "h/proxyv2@sha256:ccc"},
		{Cluster: "cluster-1", Component: "istiod", Image: "h/pilot:t", ImageID: "h/pilot@sha256:aaa"},
		{Cluster: "cluster-1", Component: "ztunnel", Image: "h/ztunnel:t", ImageID: "h/ztunnel@sha256:bbb"},
	}, imgs, "one row per component image, other pods ignored")
}
