package workload

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// NodeLeaseNamespace holds the node heartbeats the node lifecycle controller reads.
const NodeLeaseNamespace = corev1.NamespaceNodeLease

// LeaseSeconds is the duration written into fake nodes' leases (the kubelet's default is 40 s);
// KeepNodesReady renews well inside it.
const LeaseSeconds = 40

// FakeNode is a Node the framework writes the status of: labelled cluster.FakeNodeLabel=true in
// every provider, and tainted with it (NoSchedule) where a scheduler runs (c.Runs.Scheduler), so
// real pods stay off it.
func FakeNode(c *cluster.Cluster, name string, extra map[string]string) *corev1.Node {
	l := map[string]string{cluster.FakeNodeLabel: "true"}
	for k, v := range extra {
		l[k] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	if c.Runs.Scheduler {
		n.Spec.Taints = []corev1.Taint{{Key: cluster.FakeNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// RenewLease creates or renews node n's Lease in kube-node-lease, as a kubelet does every 10 s.
// The lease is owned by the node (the garbage collector removes it with the node) and carries the
// fake-node label so teardown can find it. A renewal that loses a race with another writer (an
// update conflict, or a create after someone else's) reads the lease again and retries, as the
// kubelet's lease controller does.
func RenewLease(ctx context.Context, c *cluster.Cluster, n *corev1.Node) error {
	leases := c.Client.CoordinationV1().Leases(NodeLeaseNamespace)
	lost := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	return retry.OnError(retry.DefaultRetry, lost, func() error {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Name: n.Name, Namespace: NodeLeaseNamespace,
					Labels:          map[string]string{cluster.FakeNodeLabel: "true"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}},
				},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: new(n.Name), LeaseDurationSeconds: new(int32(LeaseSeconds)), RenewTime: &now,
				},
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		l.Spec.RenewTime = &now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// StatusReportEvery is how often a fake node's status is written when nothing changed (the
// kubelet's nodeStatusReportFrequency); the lease is the heartbeat in between.
const StatusReportEvery = 5 * time.Minute

// heartbeat puts node n's Ready condition back to True, or refreshes it once StatusReportEvery has
// passed; the node lifecycle controller sets it Unknown (and taints the node) when heartbeats stop.
func heartbeat(c *cluster.Cluster, n *corev1.Node, now time.Time) error {
	status := n.Status.DeepCopy()
	found := false
	for i, cond := range status.Conditions {
		if cond.Type != corev1.NodeReady {
			continue
		}
		found = true
		if cond.Status == corev1.ConditionTrue && now.Sub(cond.LastHeartbeatTime.Time) < StatusReportEvery {
			return nil
		}
		ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: cond.LastTransitionTime}
		if cond.Status != corev1.ConditionTrue {
			ready.LastTransitionTime = metav1.NewTime(now)
		}
		status.Conditions[i] = ready
	}
	if !found {
		status.Conditions = append(status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)})
	}
	_, err := PatchNodeStatus(c, n, *status)
	return err
}

// NodeKeeper keeps a cluster's fake nodes alive the way their kubelets would: every interval it
// renews each node's lease and, when needed, its Ready condition. A node that fails is logged
// and counted, and the others are still renewed.
type NodeKeeper struct {
	c        *cluster.Cluster
	log      io.Writer
	failures atomic.Int64
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// StartNodeKeeper starts keeping every node of c labelled cluster.FakeNodeLabel=true until ctx
// ends or Stop is called.
func StartNodeKeeper(ctx context.Context, c *cluster.Cluster, interval time.Duration, log io.Writer) *NodeKeeper {
	if log == nil {
		log = io.Discard
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &NodeKeeper{c: c, log: log, cancel: cancel}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			k.renewAll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return k
}

// Failures counts node renewals (lease or status) that failed so far.
func (k *NodeKeeper) Failures() int64 { return k.failures.Load() }

// Stop ends the loop and waits for it.
func (k *NodeKeeper) Stop() { k.cancel(); k.wg.Wait() }

// KeepNodesReady is StartNodeKeeper for callers that only stop it.
func KeepNodesReady(ctx context.Context, c *cluster.Cluster, interval time.Duration, log io.Writer) (stop func()) {
	return StartNodeKeeper(ctx, c, interval, log).Stop
}

func (k *NodeKeeper) renewAll(ctx context.Context) {
	sel := labels.SelectorFromSet(labels.Set{cluster.FakeNodeLabel: "true"}).String()
	nodes, err := k.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		if ctx.Err() == nil {
			k.failures.Add(1)
			fmt.Fprintf(k.log, "ambientmc: %s: keeping fake nodes ready: listing them: %v\n", k.c.Name, err)
		}
		return
	}
	var failed []string
	var first error
	for i := range nodes.Items {
		n := &nodes.Items[i]
		err := RenewLease(ctx, k.c, n)
		if err == nil {
			err = heartbeat(k.c, n, time.Now())
		}
		if err != nil && ctx.Err() == nil {
			k.failures.Add(1)
			failed = append(failed, n.Name)
			if first == nil {
				first = fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(k.log, "ambientmc: %s: keeping fake nodes ready: %d of %d failed this round (%v; %d failures so far): %v\n",
			k.c.Name, len(failed), len(nodes.Items), failed, k.failures.Load(), first)
	}
}
