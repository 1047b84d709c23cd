package churn

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// fakeCluster holds s's scale pods, Running and Ready, in a fake API server.
func fakeCluster(t *testing.T, s workload.Scale) *cluster.Cluster {
	t.Helper()
	client := fake.NewClientset()
	c := &cluster.Cluster{Cluster: topology.Cluster{Name: "c1", Network: "network-1", Index: 1}, Client: client,
		Addresses: cluster.Addresses{Plan: plan1{}}}
	for k := range s.Nodes {
		host, err := topology.NodeIP(1, k)
		require.NoError(t, err)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: workload.NodeName(k)}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host.String()}}
		_, err = client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	m := 0
	for n := range s.Services {
		ns, svc := s.ServiceNamespace(n), workload.ServiceName(n)
		for k := range s.PodsOf(n) {
			p := workload.NewPod(ns, svc+"-"+string(rune('a'+k)), svc, svc, workload.NodeName(m%s.Nodes))
			ip, err := topology.PodIP(1, workload.ReservedPodIPs+m)
			require.NoError(t, err)
			host, err := topology.NodeIP(1, m%s.Nodes)
			require.NoError(t, err)
			p.Status = workload.RunningStatus(ip, host, true)
			_, err = client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
			require.NoError(t, err)
			m++
		}
	}
	return c
}

// plan1 is the local provider's plan for cluster index 1.
type plan1 struct{}

func (plan1) PodIP(n int) (netip.Addr, error)  { return topology.PodIP(1, n) }
func (plan1) NodeIP(k int) (netip.Addr, error) { return topology.NodeIP(1, k) }

var (
	smallScale = workload.Scale{Name: "test", Services: 2, Pods: 4, Namespaces: 1, Nodes: 2}
	onePod     = workload.Scale{Name: "test", Services: 1, Pods: 1, Namespaces: 1, Nodes: 1}
)

// localPods makes s's pods, in a fake cluster, the targets of local churn (no split-horizon keys).
func localPods(t *testing.T, s workload.Scale) (*cluster.Cluster, *Pods) {
	t.Helper()
	c := fakeCluster(t, s)
	p, err := NewPods(context.Background(), &expctx.Context{Scale: s}, c, nil, time.Second)
	require.NoError(t, err)
	return c, p
}

// observeTruth plays the watcher: it shows the API's current state for every key.
func observeTruth(t *testing.T, tr *Tracker, p *Pods, at time.Time) map[string]string {
	t.Helper()
	truth, err := p.Truth(context.Background())
	require.NoError(t, err)
	for k, v := range truth {
		tr.Observe(k, v, at)
	}
	return truth
}

func TestLocalReplaceDeletesAndCreatesReady(t *testing.T) {
	c, p := localPods(t, smallScale)
	tr := NewTracker(nil)
	seed := observeTruth(t, tr, p, time.Now())
	require.Len(t, seed, 4)

	churned, err := Run(context.Background(), tr, Window{Mode: Replace, Rate: 100, Count: 3}, p)
	require.NoError(t, err)
	assert.Equal(t, 3, churned.Changes)
	// Each replacement is two tracked writes: the old pod absent, the new one healthy.
	assert.Equal(t, 6, tr.Pending())

	pods, err := c.Client.CoreV1().Pods(workload.NamespaceName(0)).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 4, "replacements keep the pod count")
	var replacements int
	for _, kp := range pods.Items {
		if kp.Name[len(kp.Name)-2] == 'c' || kp.Name[len(kp.Name)-3] == 'c' {
			replacements++
			assert.Equal(t, corev1.PodRunning, kp.Status.Phase)
			assert.True(t, podReady(&kp), "replacement %s written Ready", kp.Name)
			assert.NotEmpty(t, kp.Status.PodIP)
		}
	}
	assert.Equal(t, 3, replacements)

	truth := observeTruth(t, tr, p, time.Now())
	assert.Zero(t, tr.Pending(), "every write shows once the watcher holds the API's state")
	assert.Empty(t, tr.Mismatches(truth))
	absent := 0
	for _, v := range truth {
		if v == Absent {
			absent++
		}
	}
	assert.Equal(t, 3, absent, "the deleted pods are part of the truth, as absent")
}

func TestReplaceWaitsForIdleTargets(t *testing.T) {
	_, p := localPods(t, onePod)
	tr := NewTracker(nil)
	observeTruth(t, tr, p, time.Now())
	job, err := p.Next(tr, Replace)
	require.NoError(t, err)
	require.NoError(t, job(context.Background()))
	// The only pod is the replacement, whose creation has not shown yet.
	_, err = p.Next(tr, Replace)
	assert.ErrorIs(t, err, errNoIdle)
	observeTruth(t, tr, p, time.Now())
	_, err = p.Next(tr, Replace)
	assert.NoError(t, err)
}

func TestTimedWindowEndsOnTimeWhenTargetsFallBehind(t *testing.T) {
	_, p := localPods(t, onePod)
	tr := NewTracker(nil)
	observeTruth(t, tr, p, time.Now())
	// Nothing observes the replacement, so the only pod never becomes idle again: every change
	// after the first is due but cannot start.
	start := time.Now()
	churned, err := Run(context.Background(), tr, Window{Mode: Replace, Rate: 100, Duration: 300 * time.Millisecond}, p)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "the window ends at its length, not when its schedule is done")
	assert.Equal(t, 1, churned.Changes)
	assert.InDelta(t, 29, churned.Dropped, 1, "the changes due in 300 ms at 100/s, less the one made")
}

func TestReadyFlipsAlternate(t *testing.T) {
	_, p := localPods(t, smallScale)
	tr := NewTracker(nil)
	observeTruth(t, tr, p, time.Now())
	_, err := Run(context.Background(), tr, Window{Mode: Ready, Rate: 200, Count: 4}, p)
	require.NoError(t, err)
	truth := observeTruth(t, tr, p, time.Now())
	for k, v := range truth {
		assert.Equal(t, Unhealthy, v, k)
	}
	n, err := p.RestoreReady(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	truth, err = p.Truth(context.Background())
	require.NoError(t, err)
	for k, v := range truth {
		assert.Equal(t, Healthy, v, k)
	}
}

func TestRemoteRefusesReadyMode(t *testing.T) {
	c := fakeCluster(t, smallScale)
	p, err := NewPods(context.Background(), &expctx.Context{Scale: smallScale}, c, map[int]string{0: "sh-0", 1: "sh-1"}, time.Second)
	require.NoError(t, err)
	_, err = p.Next(NewTracker(nil), Ready)
	assert.Error(t, err)
}

func TestRemoteReplaceIsOneChangeInFlightPerService(t *testing.T) {
	c := fakeCluster(t, smallScale)
	keys := map[int]string{0: "sh-0", 1: "sh-1"}
	p, err := NewPods(context.Background(), &expctx.Context{Scale: smallScale}, c, keys, 2*time.Second)
	require.NoError(t, err)
	tr := NewTracker(map[string]string{"sh-0": Capacity(2), "sh-1": Capacity(2)})
	job0, err := p.Next(tr, Replace)
	require.NoError(t, err)
	job1, err := p.Next(tr, Replace)
	require.NoError(t, err)
	_, err = p.Next(tr, Replace)
	assert.ErrorIs(t, err, errNoIdle, "both services have a change in flight")

	done := make(chan error, 1)
	go func() { done <- job0(context.Background()) }()
	// Play istiod: capacity drops with the delete, comes back with the replacement.
	require.Eventually(t, func() bool { return tr.Busy("sh-0") }, time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, tr.Results(), 1, "no replacement is written before the delete shows")
	tr.Observe("sh-0", Capacity(1), time.Now())
	require.Eventually(t, func() bool { return tr.Busy("sh-0") }, time.Second, time.Millisecond, "the create waits for the delete to show")
	tr.Observe("sh-0", Capacity(2), time.Now())
	require.NoError(t, <-done)
	rs := tr.Results()
	require.Len(t, rs, 2)
	assert.Equal(t, []string{Capacity(1), Capacity(2)}, []string{rs[0].Want, rs[1].Want})
	assert.True(t, rs[0].Reflected && rs[1].Reflected)
	_ = job1 // holds service 1 busy
}

func TestRestorePutsBackThePodsNewPodsFound(t *testing.T) {
	c, p := localPods(t, smallScale)
	ns := workload.NamespaceName(0)
	type podState struct {
		IP, Node string
		Ready    bool
	}
	state := func() map[string]podState {
		pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		m := map[string]podState{}
		for _, kp := range pods.Items {
			m[kp.Name] = podState{kp.Status.PodIP, kp.Spec.NodeName, podReady(&kp)}
		}
		return m
	}
	before := state()
	tr := NewTracker(nil)
	observeTruth(t, tr, p, time.Now())
	_, err := Run(context.Background(), tr, Window{Mode: Replace, Rate: 100, Count: 3}, p)
	require.NoError(t, err)
	observeTruth(t, tr, p, time.Now())
	_, err = Run(context.Background(), tr, Window{Mode: Ready, Rate: 100, Count: 1}, p)
	require.NoError(t, err)
	require.NotEqual(t, before, state(), "the churn changed nothing to restore")

	recreated, err := p.Restore(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, recreated)
	assert.Equal(t, before, state(), "the same pods, addresses, nodes and readiness as before the churn")
	assert.Equal(t, 4, p.Len())
}
