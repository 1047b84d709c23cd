package incluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// localClusters starts n real local-provider clusters (kube-apiserver + etcd, RBAC on) to point
// the in-cluster part at, or skips when their binaries are not built (`make bins`).
func localClusters(tb testing.TB, n int) []*cluster.Cluster {
	tb.Helper()
	_, cs := localtest.Clusters(tb, n)
	for _, c := range cs {
		settle(tb, c)
	}
	return cs
}

// settle waits until the API server has made its own objects (the kubernetes Service and its
// ClusterIP appear a moment after it answers), so before/after snapshots compare only the test's.
func settle(tb testing.TB, c *cluster.Cluster) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		_, err := c.Client.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the API server never created the kubernetes Service")
	last := snapshot(tb, c)
	for range 60 {
		time.Sleep(500 * time.Millisecond)
		now := snapshot(tb, c)
		if slices.Equal(now, last) {
			return
		}
		last = now
	}
	tb.Fatalf("cluster %s: its objects never settled", c.Name)
}

// kubeTopology writes an ambientmc topology file naming each cluster's kubeconfig (kubeconfigs
// overrides some) and loads it as a user's file would be.
func kubeTopology(t *testing.T, cs []*cluster.Cluster, kubeconfigs map[string]string) *topology.Topology {
	t.Helper()
	var b strings.Builder
	b.WriteString("clusters:\n")
	for _, c := range cs {
		kc := c.Kubeconfig
		if k, ok := kubeconfigs[c.Name]; ok {
			kc = k
		}
		fmt.Fprintf(&b, "- name: %s\n  network: %s\n  kubeconfig: %s\n", c.Name, c.Network, kc)
	}
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	topo, err := topology.Load(path)
	require.NoError(t, err)
	return topo
}

func newProvider(t *testing.T, reuse bool) *Provider {
	t.Helper()
	p, err := New(Options{Name: "kube", RunDir: t.TempDir(), Images: install.Images{Hub: "example.com/istio", Tag: "test"}, ReuseIstio: reuse})
	require.NoError(t, err)
	return p
}

// snapshot lists every object of every listable resource of c as "resource ns/name uid", so a
// test can show that nothing was created, changed into another object or deleted.
func snapshot(t testing.TB, c *cluster.Cluster) []string {
	t.Helper()
	ctx := context.Background()
	lists, err := c.Client.Discovery().ServerPreferredResources()
	require.NoError(t, err)
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		require.NoError(t, err)
		for _, r := range l.APIResources {
			if !contains(r.Verbs, "list") || r.Name == "events" {
				continue
			}
			items, err := c.Dynamic.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			require.NoError(t, err, r.Name)
			for _, o := range items.Items {
				out = append(out, fmt.Sprintf("%s %s/%s %s", r.Name, o.GetNamespace(), o.GetName(), o.GetUID()))
			}
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// readyNode is a node as a kubelet would report it, without the fake-node label.
func readyNode(name string, labels, annotations map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}},
	}
}

// createNode creates n with its status (the API server drops status on create; written as a
// kubelet patches it, since the controller-manager updates new nodes at once) and clears the
// not-ready taint the API server's admission adds to every new node. A fake-labelled node gets its
// lease at once, as the keeper that holds it Ready would write: the local cluster under the test
// runs such a keeper, which would otherwise create the lease at a moment of its own, between a
// test's snapshots.
func createNode(t *testing.T, c *cluster.Cluster, n *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	nodes := c.Client.CoreV1().Nodes()
	got, err := nodes.Create(ctx, n, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = workload.PatchNodeStatus(c, got, n.Status)
	require.NoError(t, err)
	if n.Labels[cluster.FakeNodeLabel] == "true" {
		require.NoError(t, workload.RenewLease(ctx, c, got))
	}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got.Spec.Taints = n.Spec.Taints
		_, err = nodes.Update(ctx, got, metav1.UpdateOptions{})
		return err
	}))
}
