package incluster

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/mesh/install"
)

func TestDetectPlatform(t *testing.T) {
	node := func(name string, labels map[string]string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	for _, tc := range []struct {
		name, version string
		groups        []string
		nodes         []corev1.Node
		want, from    string
	}{
		{"gke, as Istio detects it", "v1.33.5-gke.1201000", nil, nil, "gke", "server version v1.33.5-gke.1201000"},
		{"openshift", "v1.32.6", []string{"apps", "config.openshift.io", "route.openshift.io"}, nil, "openshift", "serves API group config.openshift.io"},
		{"k3s", "v1.32.3+k3s1", nil, []corev1.Node{node("server-0", nil)}, "k3s", "server version v1.32.3+k3s1"},
		{"k3d", "v1.32.3+k3s1", nil, []corev1.Node{node("k3d-c1-server-0", nil), node("k3d-c1-agent-0", nil)}, "k3d", "server version v1.32.3+k3s1, nodes named k3d-*"},
		{"microk8s", "v1.33.1", nil, []corev1.Node{node("box", map[string]string{"microk8s.io/cluster": "true"})}, "microk8s", "node box labelled microk8s.io/cluster=true"},
		{"kind", "v1.37.0", []string{"apps"}, []corev1.Node{node("ambientmc-cluster-1-control-plane", nil)}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, from := detectPlatform(tc.version, tc.groups, tc.nodes)
			assert.Equal(t, tc.want, name)
			assert.Equal(t, tc.from, from)
			if name != "" {
				assert.NoError(t, install.CheckPlatform(name), "one of Istio's platform names")
			}
		})
	}
}

// On a real API server: a served config.openshift.io group makes the cluster OpenShift to the
// preflight, -istio.platform overrides what a cluster shows, and an unknown name is refused.
func TestPreflightChoosesThePlatformOnRealAPIServer(t *testing.T) {
	t.Parallel() // each on its own local cluster; most of the time is waiting on it
	cs := localClusters(t, 1)
	c := cs[0]
	ctx := context.Background()
	topo := kubeTopology(t, cs, nil)
	preflight := func(platform string) (*Provider, string) {
		var log bytes.Buffer
		p, err := New(Options{Name: "kube", RunDir: t.TempDir(), Log: &log, Images: install.Images{Hub: "example.com/istio", Tag: "test"}, Platform: platform})
		require.NoError(t, err)
		require.Error(t, p.Preflight(ctx, topo), "a loopback API server is always refused")
		return p, log.String()
	}

	p, _ := preflight("")
	pl := p.Facts().Platforms[c.Name]
	name, from := pl.Name, pl.From
	assert.Empty(t, name, "a plain API server shows no platform")
	assert.Empty(t, from)

	// What OpenShift serves, as far as discovery sees it: an API group config.openshift.io.
	crd := &unstructured.Unstructured{}
	require.NoError(t, crd.UnmarshalJSON([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
	 "metadata":{"name":"clusterversions.config.openshift.io"},
	 "spec":{"group":"config.openshift.io","scope":"Cluster","names":{"plural":"clusterversions","singular":"clusterversion","kind":"ClusterVersion"},
	  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`)))
	_, err := c.Dynamic.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Dynamic.Resource(crdGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	require.Eventually(t, func() bool {
		_, err := c.Client.Discovery().ServerResourcesForGroupVersion("config.openshift.io/v1")
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)

	p, log := preflight("")
	pl = p.Facts().Platforms[c.Name]
	name, from = pl.Name, pl.From
	assert.Equal(t, "openshift", name)
	assert.Equal(t, "serves API group config.openshift.io", from)
	assert.Contains(t, log, "cluster-1: Istio platform openshift (serves API group config.openshift.io)")

	p, log = preflight("k3s")
	pl = p.Facts().Platforms[c.Name]
	name, from = pl.Name, pl.From
	assert.Equal(t, "k3s", name, "the flag wins")
	assert.Equal(t, "-istio.platform", from)
	assert.Contains(t, log, "cluster-1: shows platform openshift (serves API group config.openshift.io), but -istio.platform=k3s is used as given")

	_, err = New(Options{Name: "kube", Images: install.Images{Hub: "h", Tag: "t"}, Platform: "eks"})
	require.ErrorContains(t, err, "-istio.platform=eks: not one of Istio's platforms")
}

func TestPlatformPermissionsCoverKubeSystem(t *testing.T) {
	assert.Empty(t, platformPermissions(""))
	assert.Empty(t, platformPermissions("k3s"), "k3s keeps everything in istio-system")
	for _, p := range []string{"gke", "openshift"} {
		assert.Contains(t, platformPermissions(p), permission{verb: "create", group: "apps", resource: "daemonsets", namespace: "kube-system"}, p)
	}
}
