package workload

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// NodeLeaseNamespace holds the node heartbeats the node lifecycle controller reads.
const NodeLeaseNamespace = corev1.NamespaceNodeLease

// LeaseSeconds is the duration written into fake nodes' leases (the kubelet's default is 40 s);
// KeepNodesReady renews well inside it.
const LeaseSeconds = 40

// FakeNode is a Node the framework writes the status of: labelled cluster.FakeNodeLabel=true in
// every provider, and tainted with it (NoSchedule) where c.FakeNodes.Taint says real pods must
// stay off it.
func FakeNode(c *cluster.Cluster, name string, extra map[string]string) *corev1.Node {
	l := map[string]string{cluster.FakeNodeLabel: "true"}
	for k, v := range extra {
		l[k] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	if c.FakeNodes.Taint {
		n.Spec.Taints = []corev1.Taint{{Key: cluster.FakeNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// RenewLease creates or renews node n's Lease in kube-node-lease, as a kubelet does every 10 s.
// The lease is owned by the node (a garbage collector removes it with the node) and carries the
// fake-node label so teardown can find it.
func RenewLease(ctx context.Context, c *cluster.Cluster, n *corev1.Node) error {
	leases := c.Client.CoordinationV1().Leases(NodeLeaseNamespace)
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
}

// heartbeat writes node n's Ready condition as True with a fresh heartbeat; the node lifecycle
// controller sets it Unknown (and taints the node unreachable) when heartbeats stop.
func heartbeat(ctx context.Context, c *cluster.Cluster, n *corev1.Node) error {
	now := metav1.Now()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: now, LastTransitionTime: now}
	found := false
	for i, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				ready.LastTransitionTime = cond.LastTransitionTime
			}
			n.Status.Conditions[i], found = ready, true
		}
	}
	if !found {
		n.Status.Conditions = append(n.Status.Conditions, ready)
	}
	_, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// KeepNodesReady renews, every interval until ctx ends or stop is called, the lease and the Ready
// condition of every node of c labelled cluster.FakeNodeLabel=true, so the node lifecycle
// controller of a real cluster neither marks them NotReady nor evicts their pods. Failures are
// written to log and retried on the next tick. stop waits for the loop to end.
func KeepNodesReady(ctx context.Context, c *cluster.Cluster, interval time.Duration, log io.Writer) (stop func()) {
	if log == nil {
		log = io.Discard
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := renewAll(ctx, c); err != nil && ctx.Err() == nil {
				fmt.Fprintf(log, "ambientmc: %s: keeping fake nodes ready: %v\n", c.Name, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func renewAll(ctx context.Context, c *cluster.Cluster) error {
	sel := labels.SelectorFromSet(labels.Set{cluster.FakeNodeLabel: "true"}).String()
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if err := RenewLease(ctx, c, n); err != nil {
			return fmt.Errorf("node %s: lease: %w", n.Name, err)
		}
		if err := heartbeat(ctx, c, n); err != nil {
			return fmt.Errorf("node %s: Ready condition: %w", n.Name, err)
		}
	}
	return nil
}
