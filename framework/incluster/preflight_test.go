package incluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/topology"
)

const fakeOnly = "no schedulable node that is not a fake node"

// The local provider's clusters, where every node is one of the framework's fake nodes, are
// refused with one error naming each cluster and the reason, and preflight creates nothing.
func TestPreflightRefusesFakeOnlyClusters(t *testing.T) {
	t.Parallel() // each on its own local cluster; most of the time is waiting on it
	cs := localClusters(t, 2)
	ctx := context.Background()
	for _, c := range cs {
		n := readyNode("node-0", map[string]string{cluster.FakeNodeLabel: "true"}, nil)
		createNode(t, c, n)
	}
	before := [][]string{snapshot(t, cs[0]), snapshot(t, cs[1])}

	topo := kubeTopology(t, cs, nil)
	p := newProvider(t, false)
	err := p.Preflight(ctx, topo)
	require.Error(t, err)
	msg := err.Error()
	t.Log(msg)
	assert.Contains(t, msg, "preflight refused 2 of 2 clusters")
	for _, c := range cs {
		assert.Contains(t, msg, "cluster "+c.Name+" (kubeconfig "+c.Kubeconfig+"):")
	}
	assert.Equal(t, 2, strings.Count(msg, fakeOnly), "the reason is given for each cluster")
	assert.Contains(t, msg, "1 framework fake nodes (label "+cluster.FakeNodeLabel+"=true)")

	_, err = p.Create(ctx, topo)
	require.ErrorContains(t, err, "Preflight must pass", "a refused topology cannot be created")
	assert.Equal(t, before, [][]string{snapshot(t, cs[0]), snapshot(t, cs[1])}, "preflight created nothing")
}

// Each other reason a real API server can show, on one local cluster. A ready node without the
// fake-node label stands in for a real kubelet's node, so only the reason under test remains
// (besides the loopback API server address, which every local cluster has).
func TestPreflightReasons(t *testing.T) {
	t.Parallel() // each on its own local cluster; most of the time is waiting on it
	cs := localClusters(t, 1)
	c := cs[0]
	ctx := context.Background()
	topo := kubeTopology(t, cs, nil)
	preflight := func(t *testing.T, reuse bool) string {
		err := newProvider(t, reuse).Preflight(ctx, topo)
		require.Error(t, err, "a loopback API server is always refused")
		return err.Error()
	}

	t.Run("kwok nodes do not count", func(t *testing.T) {
		createNode(t, c, readyNode("kwok-0", map[string]string{"type": "kwok"}, nil))
		createNode(t, c, readyNode("kwok-1", nil, map[string]string{"kwok.x-k8s.io/node": "fake"}))
		msg := preflight(t, false)
		assert.Contains(t, msg, fakeOnly)
		assert.Contains(t, msg, "2 kwok nodes")
	})
	t.Run("tainted or cordoned nodes do not count", func(t *testing.T) {
		n := readyNode("tainted", nil, nil)
		n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		createNode(t, c, n)
		msg := preflight(t, false)
		assert.Contains(t, msg, fakeOnly)
		assert.Contains(t, msg, "tainted: tainted node-role.kubernetes.io/control-plane:NoSchedule")
	})
	t.Run("a ready real node passes the node check", func(t *testing.T) {
		createNode(t, c, readyNode("real-0", nil, nil))
		msg := preflight(t, false)
		assert.NotContains(t, msg, fakeOnly)
		assert.Contains(t, msg, "is a loopback address")
		assert.NotContains(t, msg, "missing permissions", "the local admin may do everything")
		assert.NotContains(t, msg, "Istio is already installed")
	})

	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))
	t.Run("an istiod Deployment means Istio is installed", func(t *testing.T) {
		labels := map[string]string{"app": "istiod"}
		_, err := c.Client.AppsV1().Deployments(mesh.SystemNamespace).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "istiod", Namespace: mesh.SystemNamespace},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "discovery", Image: "docker.io/istio/pilot:1.20.0"}}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		msg := preflight(t, false)
		assert.Contains(t, msg, "Istio is already installed: Deployment istio-system/istiod exists (docker.io/istio/pilot:1.20.0); uninstall it or pass -kube.reuse-istio")
		assert.NotContains(t, preflight(t, true), "Istio is already installed", "-kube.reuse-istio allows it")
	})
	t.Run("a foreign cacerts", func(t *testing.T) {
		_, err := c.Client.CoreV1().Secrets(mesh.SystemNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "cacerts", Namespace: mesh.SystemNamespace},
			Data:       map[string][]byte{"ca-cert.pem": []byte("someone else's")},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		msg := preflight(t, false)
		assert.Contains(t, msg, "a cacerts Secret exists in istio-system")
		assert.Contains(t, preflight(t, true), "a cacerts Secret exists", "-kube.reuse-istio does not allow it: the install would refuse to replace it")
	})
	t.Run("a network label that disagrees with the topology", func(t *testing.T) {
		assert.NotContains(t, preflight(t, false), "is labelled", "EnsureSystemNamespace wrote the topology's network")
		ns, err := c.Client.CoreV1().Namespaces().Get(ctx, mesh.SystemNamespace, metav1.GetOptions{})
		require.NoError(t, err)
		ns.Labels[mesh.NetworkLabel] = "elsewhere"
		_, err = c.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Contains(t, preflight(t, true),
			`namespace istio-system is labelled topology.istio.io/network=elsewhere but the topology puts the cluster on network "network-1"`)
	})
	t.Run("credentials without RBAC", func(t *testing.T) {
		kc := tokenKubeconfig(t, c, "nobody")
		msg := func() string {
			err := newProvider(t, false).Preflight(ctx, kubeTopology(t, cs, map[string]string{c.Name: kc}))
			require.Error(t, err)
			return err.Error()
		}()
		assert.Contains(t, msg, "missing permissions (SelfSubjectAccessReview): create namespaces, create clusterroles.rbac.authorization.k8s.io")
		assert.Contains(t, msg, "create deployments.apps in istio-system")
		assert.Contains(t, msg, "create pods/portforward in istio-system")
		assert.Contains(t, msg, "cannot list nodes", "and says what it could not check")
	})
	t.Run("an unreachable API server", func(t *testing.T) {
		kc := tokenKubeconfig(t, c, "nobody-else")
		cfg, err := clientcmd.LoadFromFile(kc)
		require.NoError(t, err)
		cfg.Clusters["c"].Server = "https://127.0.0.1:1" // nothing listens on port 1
		require.NoError(t, clientcmd.WriteToFile(*cfg, kc))
		err = newProvider(t, false).Preflight(ctx, kubeTopology(t, cs, map[string]string{c.Name: kc}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the API server https://127.0.0.1:1 is unreachable")
	})
}

// tokenKubeconfig writes a kubeconfig for a new service account of c that has no RBAC at all.
func tokenKubeconfig(t *testing.T, c *cluster.Cluster, name string) string {
	t.Helper()
	ctx := context.Background()
	sas := c.Client.CoreV1().ServiceAccounts("default")
	_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tok, err := sas.CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: c.RESTConfig.Host, CertificateAuthorityData: c.RESTConfig.CAData}
	if c.RESTConfig.CAFile != "" {
		data, err := os.ReadFile(c.RESTConfig.CAFile)
		require.NoError(t, err)
		cfg.Clusters["c"].CertificateAuthorityData = data
	}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

func TestCheckVersion(t *testing.T) {
	assert.Empty(t, checkVersion("v1.32.0"))
	assert.Empty(t, checkVersion("v1.36.1"))
	assert.Empty(t, checkVersion("v1.33.2-gke.1200000"))
	assert.Equal(t, "Kubernetes v1.31.9 is older than 1.32.0, the oldest the pinned Istio supports", checkVersion("v1.31.9"))
	assert.Contains(t, checkVersion("banana"), `cannot parse the Kubernetes version "banana"`)
}

func TestCheckInternalAddress(t *testing.T) {
	assert.Empty(t, checkInternalAddress("https://10.0.0.7:6443"))
	assert.Empty(t, checkInternalAddress("https://api.cluster-2.example.com"))
	assert.Contains(t, checkInternalAddress("https://127.0.0.1:41234"), "127.0.0.1:41234 is a loopback address")
	assert.Contains(t, checkInternalAddress("https://localhost:6443"), "loopback")
	assert.Contains(t, checkInternalAddress("::"), "does not parse")
}

func TestNewNeedsHubAndTag(t *testing.T) {
	_, err := New(Options{Name: "kube"})
	require.Error(t, err)
	assert.Equal(t, "-provider=kube installs Istio from images: pass -istio.hub (e.g. -istio.hub=registry.istio.io/testing) and -istio.tag (e.g. -istio.tag=1.31-dev or a full commit SHA) too, or neither for the images make images builds", err.Error())
	_, err = New(Options{Name: "kube", Images: install.Images{Hub: "h"}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "-istio.hub")
	assert.Contains(t, err.Error(), "-istio.tag")
	_, err = New(Options{Images: install.Images{Hub: "h", Tag: "t"}})
	assert.ErrorContains(t, err, "Options.Name is empty", "a composing provider names itself")
}

func TestPreflightNeedsATopologyFile(t *testing.T) {
	topo, err := topology.Generate(2)
	require.NoError(t, err)
	err = newProvider(t, false).Preflight(context.Background(), topo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-provider=kube uses existing clusters: pass -topology=FILE")

	topo, err = topology.Parse([]byte(`[{"kind":"Kubernetes","clusterName":"a","meta":{"kubeconfig":"/k/a"}},{"kind":"Kubernetes","clusterName":"b"}]`), "prow.json")
	require.NoError(t, err)
	err = newProvider(t, false).Preflight(context.Background(), topo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[1].meta.kubeconfig: cluster "b" has no kubeconfig`)
	assert.NotContains(t, err.Error(), "/k/a", "refused before any cluster is contacted")
}
