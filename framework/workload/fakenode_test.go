package workload_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	. "github.com/ambientmc/ambientmc/framework/workload"
)

var tiny = Scale{Name: "tiny", Services: 1, Pods: 2, Namespaces: 1, Nodes: 2}

// deployTiny deploys tiny on c and returns its first node, checking the fake-node label that
// every provider's fake nodes carry.
func deployTiny(t *testing.T, ctx context.Context, c *cluster.Cluster) *corev1.Node {
	t.Helper()
	_, err := Deploy(ctx, c, tiny, nil)
	require.NoError(t, err)
	n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName(0), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", n.Labels[cluster.FakeNodeLabel])
	return n
}

// On a real API server: fake nodes as a real cluster needs them (label, taint, a lease that keeps
// being renewed, a Ready condition that is put back), and pods that show 1/1 Running.
func TestFakeNodesOnRealClustersAreTaintedAndKeptReady(t *testing.T) {
	_, cs := realClusters(t, 1)
	c := cs[0]
	c.Runs = cluster.Components{Controllers: true, Scheduler: true}
	ctx := context.Background()
	n := deployTiny(t, ctx, c)
	// (The API server's TaintNodesByCondition admission adds node.kubernetes.io/not-ready too.)
	assert.Contains(t, n.Spec.Taints, corev1.Taint{Key: cluster.FakeNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule})

	leases := c.Client.CoordinationV1().Leases(NodeLeaseNamespace)
	first, err := leases.Get(ctx, NodeName(0), metav1.GetOptions{})
	require.NoError(t, err, "Deploy creates the lease with the node")
	require.NotNil(t, first.Spec.RenewTime)
	assert.Equal(t, NodeName(0), *first.Spec.HolderIdentity)
	assert.Equal(t, n.UID, first.OwnerReferences[0].UID, "owned by its node")

	// The node lifecycle controller sets Ready to Unknown when heartbeats stop.
	setReady(t, c, n, corev1.ConditionUnknown)

	stop := KeepNodesReady(ctx, c, 100*time.Millisecond, nil)
	require.Eventually(t, func() bool {
		l, err := leases.Get(ctx, NodeName(1), metav1.GetOptions{})
		return err == nil && l.ResourceVersion != first.ResourceVersion && l.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	}, 10*time.Second, 50*time.Millisecond, "the lease is renewed")
	require.Eventually(t, func() bool {
		l, err := leases.Get(ctx, NodeName(0), metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	}, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName(0), metav1.GetOptions{})
		return err == nil && nodeCondition(*n, corev1.NodeReady) == corev1.ConditionTrue
	}, 10*time.Second, 50*time.Millisecond, "Ready is put back")
	stop()
	after, err := leases.Get(ctx, NodeName(0), metav1.GetOptions{})
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond)
	still, err := leases.Get(ctx, NodeName(0), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, after.ResourceVersion, still.ResourceVersion, "stop ends the renewals")

	pods, err := c.Client.CoreV1().Pods(NamespaceName(0)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		require.Len(t, p.Status.ContainerStatuses, 1, p.Name)
		st := p.Status.ContainerStatuses[0]
		assert.Equal(t, p.Spec.Containers[0].Name, st.Name)
		assert.True(t, st.Ready, "kubectl shows 1/1")
		assert.NotNil(t, st.State.Running)
	}
}

// The local provider's nodes are labelled (every provider) and untainted (nothing real schedules
// there), and hold a lease: its node lifecycle controller needs the heartbeat as any does.
func TestFakeNodesOnLocalClustersAreLabelledAndLeased(t *testing.T) {
	_, cs := realClusters(t, 1)
	c := cs[0]
	ctx := context.Background()
	n := deployTiny(t, ctx, c)
	for _, taint := range n.Spec.Taints {
		assert.NotEqual(t, cluster.FakeNodeLabel, taint.Key)
	}
	assert.True(t, c.Runs.Controllers, "the provider runs controllers, so fake nodes are kept Ready")
	_, err := c.Client.CoordinationV1().Leases(NodeLeaseNamespace).Get(ctx, NodeName(0), metav1.GetOptions{})
	assert.NoError(t, err, "a lease")

	// An unready pod shows 0/1.
	pods, err := c.Client.CoreV1().Pods(NamespaceName(0)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	p := &pods.Items[0]
	require.NoError(t, PatchPodStatus(ctx, c, p, RunningStatus(netipMust(p.Status.PodIP), netipMust(p.Status.HostIP), false)))
	p, err = c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, p.Status.ContainerStatuses[0].Ready)
}

// setReady writes node n's Ready condition as another writer would (the node lifecycle
// controller), with the kubelet's patch.
func setReady(t *testing.T, c *cluster.Cluster, n *corev1.Node, st corev1.ConditionStatus) {
	t.Helper()
	status := n.Status.DeepCopy()
	for i := range status.Conditions {
		if status.Conditions[i].Type == corev1.NodeReady {
			status.Conditions[i].Status = st
		}
	}
	_, err := PatchNodeStatus(c, n, *status)
	require.NoError(t, err)
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }
