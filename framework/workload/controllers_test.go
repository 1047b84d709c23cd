package workload_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
	. "github.com/ambientmc/ambientmc/framework/workload"
)

// nodeMonitorGracePeriod is what these clusters' controller-managers run with: a node whose lease
// is not renewed for this long goes NotReady, and node lifecycle marks its pods NotReady. It is
// stricter than kube-controller-manager's 50 s default (kind's) and the local provider's own, and
// still twice the leases' 10 s renewal: the wait past it is the test's longest part.
const nodeMonitorGracePeriod = 20 * time.Second

// On a real API server with a real kube-controller-manager: the TTL and node IPAM controllers
// update a new node within milliseconds, so a status written with the create's resourceVersion
// (what Deploy once did) conflicts; Deploy's nodes still get their status, node lifecycle takes
// them as Ready and they stay so past the grace period, and the EndpointSlice controller
// publishes the pods.
func TestFakeNodesAndPodsMeetRealControllers(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the node monitor grace period")
	}
	_, cs := localtest.ClustersWithNodeGrace(t, 1, nodeMonitorGracePeriod)
	c := cs[0]
	require.True(t, c.Runs.Controllers)
	ctx := context.Background()
	nodes := c.Client.CoreV1().Nodes()

	// The hazard is real: a controller writes the node first, and a stale status write loses.
	created, err := nodes.Create(ctx, FakeNode(c, "conflict-probe", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := nodes.Get(ctx, created.Name, metav1.GetOptions{})
		return err == nil && n.ResourceVersion != created.ResourceVersion
	}, 10*time.Second, 20*time.Millisecond, "a controller updates the new node")
	stale := created.DeepCopy()
	stale.Status = ReadyNodeStatus(c, stale.Name, netip.MustParseAddr("127.11.255.200"))
	_, err = nodes.UpdateStatus(ctx, stale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "a status update with the create's resourceVersion conflicts: %v", err)
	require.NoError(t, nodes.Delete(ctx, created.Name, metav1.DeleteOptions{}))

	s := Scale{Name: "ctl", Services: 2, Pods: 6, Namespaces: 1, Nodes: 3}
	_, err = Deploy(ctx, c, s, nil)
	require.NoError(t, err)
	for k := range s.Nodes {
		n, err := nodes.Get(ctx, NodeName(k), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, corev1.ConditionTrue, nodeCondition(*n, corev1.NodeReady), n.Name)
		require.Eventually(t, func() bool {
			n, err := nodes.Get(ctx, NodeName(k), metav1.GetOptions{})
			return err == nil && n.Annotations["node.alpha.kubernetes.io/ttl"] != "" && n.Spec.PodCIDR != ""
		}, 10*time.Second, 50*time.Millisecond, "the TTL controller annotates %s and node IPAM gives it a podCIDR", n.Name)
	}
	// Node lifecycle lifts the not-ready taint the API server puts on new nodes once it sees Ready.
	require.Eventually(t, func() bool {
		for k := range s.Nodes {
			n, err := nodes.Get(ctx, NodeName(k), metav1.GetOptions{})
			if err != nil || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "node lifecycle takes the nodes as Ready")

	published := func() bool {
		slices, err := c.Client.DiscoveryV1().EndpointSlices(s.ServiceNamespace(0)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		ready := 0
		for _, sl := range slices.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready && isPodRef(ep) {
					ready++
				}
			}
		}
		return ready == s.Pods
	}
	require.Eventually(t, published, 30*time.Second, 200*time.Millisecond, "the EndpointSlice controller publishes every pod as ready")

	// Past the grace period the leases kept the nodes, and so their pods, Ready.
	time.Sleep(nodeMonitorGracePeriod + 5*time.Second)
	for k := range s.Nodes {
		n, err := nodes.Get(ctx, NodeName(k), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, corev1.ConditionTrue, nodeCondition(*n, corev1.NodeReady), "%s still Ready", n.Name)
		assert.False(t, slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }), "%s not unreachable", n.Name)
	}
	assert.True(t, published(), "every pod still ready in its EndpointSlice")
}

func isPodRef(ep discoveryv1.Endpoint) bool { return ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" }
