// Package clustercheck holds what every cluster a provider builds must do for the suites' figures
// to mean what they say, checked through the cluster's API: its controllers publish the scale
// services' EndpointSlices with their pods' addresses, run a Deployment's ReplicaSet, and empty a
// deleted namespace.
package clustercheck

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// SlicesHoldPods waits until the scale services' EndpointSlices hold exactly their pods'
// addresses: the EndpointSlice controller catches up on changes (a churned pod, a replacement)
// within a second or so here, and the check runs after whatever test ran before it.
func SlicesHoldPods(ctx context.Context, t *testing.T, c *cluster.Cluster, s workload.Scale) {
	t.Helper()
	var last error
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, slicesCatchUp, true, func(ctx context.Context) (bool, error) {
		last = slicesMatchPods(ctx, c, s)
		return last == nil, nil
	})
	assert.NoError(t, last, "within %s", slicesCatchUp)
}

// slicesCatchUp bounds how long the EndpointSlice controller may lag the pods.
const slicesCatchUp = 30 * time.Second

// slicesMatchPods says how the scale services' EndpointSlices differ from their pods, nil when
// they do not: every scale pod an endpoint, at least one slice per service, no loopback pod
// address, and for the first and last service exactly its pods' addresses.
func slicesMatchPods(ctx context.Context, c *cluster.Cluster, s workload.Scale) error {
	pub, err := workload.CountEndpointSlices(ctx, c, s)
	if err != nil {
		return err
	}
	if pub.Endpoints != s.Pods || pub.Slices < s.Services {
		return fmt.Errorf("%d endpoints in %d slices, want every one of %d scale pods in at least %d slices", pub.Endpoints, pub.Slices, s.Pods, s.Services)
	}
	for _, svc := range []int{0, s.Services - 1} {
		if err := serviceSlicesHoldPods(ctx, c, s, svc); err != nil {
			return err
		}
	}
	return nil
}

// serviceSlicesHoldPods says how scale service svc's EndpointSlices differ from its pods' addresses.
func serviceSlicesHoldPods(ctx context.Context, c *cluster.Cluster, s workload.Scale, svc int) error {
	ns, name := s.ServiceNamespace(svc), workload.ServiceName(svc)
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue // on its way out: the controller drops it from the slices
		}
		if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || ip.IsLoopback() {
			return fmt.Errorf("%s/%s has address %q, not a routable one", ns, p.Name, p.Status.PodIP)
		}
		want[p.Status.PodIP] = true
	}
	slices, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + name})
	if err != nil {
		return err
	}
	got := map[string]bool{}
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			for _, a := range ep.Addresses {
				got[a] = true
			}
		}
	}
	if !maps.Equal(want, got) {
		return fmt.Errorf("%s/%s: the slices hold %v, its pods have %v", ns, name, sortedKeys(got), sortedKeys(want))
	}
	return nil
}

// sortedKeys lists a set's members in order, for messages.
func sortedKeys(set map[string]bool) []string { return slices.Sorted(maps.Keys(set)) }

// ServesDeployments says whether c's API serves apps/v1 Deployments.
func ServesDeployments(c *cluster.Cluster) bool {
	list, err := c.Client.Discovery().ServerResourcesForGroupVersion("apps/v1")
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "deployments" })
}

// DeploymentGetsPods checks c's controllers with a Deployment of two replicas that no node can
// run: its ReplicaSet and two Pending pods it owns must appear, and the namespace controller must
// empty and remove the namespace once it is deleted.
func DeploymentGetsPods(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ns := "controllers-check"
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	labels := map[string]string{"app": "controllers-check"}
	_, err = c.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "check"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// Real pods must stay off fake nodes where a scheduler runs (kind, kube).
					NodeSelector: map[string]string{"ambientmc.io/no-such-node": "true"},
					Containers:   []corev1.Container{{Name: "app", Image: workload.AppImage}},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rs, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(rs.Items) != 1 {
			return false
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 2 {
			return false
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != rs.Items[0].UID {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "a ReplicaSet with two Pending pods it owns")

	// The namespace controller empties a deleted namespace and removes it.
	require.NoError(t, c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 250*time.Millisecond, "the deleted namespace goes away")
	deleted = true
}
