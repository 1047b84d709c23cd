package incluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// assertDestroyRestores checks that the run changed local and that Destroy leaves exactly the
// objects of before: kube-controller-manager's namespace controller empties the run's namespaces,
// as on any real cluster.
func assertDestroyRestores(t *testing.T, ctx context.Context, p *Provider, local *cluster.Cluster, before []string) {
	t.Helper()
	require.NotEqual(t, before, snapshot(t, local))
	start := time.Now()
	require.NoError(t, p.Destroy(ctx))
	t.Logf("Destroy took %s", time.Since(start).Round(100*time.Millisecond))
	assert.Equal(t, before, snapshot(t, local), "exactly the objects of before remain")
}

var crdTemplate = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"probes.testing.istio.io"},
 "spec":{"group":"testing.istio.io","scope":"Namespaced","names":{"plural":"probes","singular":"probe","kind":"Probe"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`

// Destroy removes what the run created outside the install (istio-system with cacerts and the
// reader RBAC, remote secrets, scale namespaces, fake nodes and their leases, CRDs) and nothing
// that existed before, even where it carries a framework name: afterwards the cluster holds
// exactly the objects (by UID) it held before Create. Everything is real: API server and
// controller-manager (no kubelet, so the run's pods sit on fake nodes, as on a real cluster).
func TestDestroyRemovesOnlyWhatTheRunCreated(t *testing.T) {
	t.Parallel() // each on its own local cluster; most of the time is waiting on it
	cs := localClusters(t, 1)
	local := cs[0]
	ctx := context.Background()

	// Objects from before the run, some with the framework's names.
	_, err := local.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scale-9"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createNode(t, local, readyNode("node-old", map[string]string{cluster.FakeNodeLabel: "true"}, nil))
	createNode(t, local, readyNode("node-real", nil, nil)) // a node with a kubelet, as far as the run knows
	_, err = local.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "istio-reader-theirs"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	before := snapshot(t, local)

	topo := kubeTopology(t, cs, nil)
	p := newProvider(t, false)
	p.checked = topo // a local cluster fails preflight (fake nodes only, loopback server)
	kcs, err := p.Create(ctx, topo)
	require.NoError(t, err)
	c := kcs[0]
	assert.Equal(t, cluster.Components{Controllers: true, Scheduler: true}, c.Runs)
	assert.Equal(t, c.Kubeconfig, c.InternalKubeconfig)

	// What env, mesh and workload do in a run.
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))
	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate(c.Name)
	require.NoError(t, err)
	_, err = c.Client.CoreV1().Secrets(mesh.SystemNamespace).Create(ctx, inter.CACertsSecret(), metav1.CreateOptions{})
	require.NoError(t, err)
	secret, err := mesh.RemoteSecret(ctx, c)
	require.NoError(t, err)
	secret.Namespace = mesh.SystemNamespace
	_, err = c.Client.CoreV1().Secrets(mesh.SystemNamespace).Create(ctx, secret, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = workload.Deploy(ctx, c, workload.Scale{Name: "tiny", Services: 2, Pods: 3, Namespaces: 1, Nodes: 2}, nil)
	require.NoError(t, err)
	crd := &unstructured.Unstructured{}
	require.NoError(t, crd.UnmarshalJSON([]byte(crdTemplate)))
	_, err = c.Dynamic.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)

	// The pods of fake nodes in the run's namespaces go at once (no kubelet would confirm a
	// graceful stop); a pod on a real node is left to its kubelet.
	pods := c.Client.CoreV1().Pods(workload.NamespaceName(0))
	onReal, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-real-node"},
		Spec: corev1.PodSpec{NodeName: "node-real", Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	keys, _, err := created(ctx, c, p.members[c.Name].before)
	require.NoError(t, err)
	require.NoError(t, removeFakeNodePods(ctx, c, keys))
	left, err := pods.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, pod := range left.Items {
		names = append(names, pod.Name+" on "+pod.Spec.NodeName)
	}
	require.Equal(t, []string{"on-real-node on node-real"}, names, "only the real node's pod is left")
	assert.Equal(t, onReal.UID, left.Items[0].UID)
	assert.Nil(t, left.Items[0].DeletionTimestamp, "the real node's pod is not being deleted")
	// This test's real node has no kubelet either.
	require.NoError(t, pods.Delete(ctx, onReal.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))

	assertDestroyRestores(t, ctx, p, local, before)
	require.NoError(t, p.Destroy(ctx), "a second Destroy has nothing to do")
}

// StartIstiod on a real API server and controller-manager without a kubelet: the install is
// applied, istiod never becomes Available, the error names the component, and Destroy removes
// every object the install and the run created. The east-west gateway of a cluster without the
// run's istiod is refused.
func TestStartIstiodFailureIsTornDown(t *testing.T) {
	t.Parallel() // each on its own local cluster; most of the time is waiting on it
	cs := localClusters(t, 1)
	local := cs[0]
	ctx := context.Background()
	before := snapshot(t, local)

	topo := kubeTopology(t, cs, nil)
	p := newProvider(t, false)
	p.opts.InstallTimeout = 2 * time.Second
	p.checked = topo
	kcs, err := p.Create(ctx, topo)
	require.NoError(t, err)
	c := kcs[0]

	_, err = p.EastWestGateway(ctx, c, time.Second)
	require.ErrorContains(t, err, "use -mesh.istiods=all")

	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate(c.Name)
	require.NoError(t, err)
	_, err = p.StartIstiod(ctx, c, cluster.IstiodOptions{CA: mesh.CACertsOf(inter)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "component istiod not ready")
	require.NotEmpty(t, p.members[c.Name].installs)
	assert.NotEmpty(t, p.members[c.Name].installs[0].Created, "the install created objects")

	// The probes too: every object accepted, nothing ever ready without a kubelet.
	_, err = WithDataPlane{p}.DeployProbes(ctx, probe.Setup{Clusters: kcs, Local: c, Remote: &cluster.Cluster{},
		CAs: map[string]cluster.CACerts{c.Name: mesh.CACertsOf(inter)}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "component probes not ready")
	_, err = c.Client.AppsV1().Deployments(workload.ProbeNamespace).Get(ctx, "fortio-client", metav1.GetOptions{})
	require.NoError(t, err, "the client's fortio Deployment was applied")
	assertDestroyRestores(t, ctx, p, local, before)
}
