package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/kube/apply"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

func decode(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := apply.DecodeFile(path)
	require.NoError(t, err)
	return objs
}

// workload finds the Deployment or DaemonSet name in file and returns its first container's
// image and literal env.
func workload(t *testing.T, path, kind, name string) (string, map[string]string) {
	t.Helper()
	for _, o := range decode(t, path) {
		if o.GetKind() != kind || o.GetName() != name {
			continue
		}
		tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
		var d appsv1.Deployment
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"spec": map[string]any{"template": tmpl}}, &d))
		ctr := d.Spec.Template.Spec.Containers[0]
		env := map[string]string{}
		for _, e := range ctr.Env {
			env[e.Name] = e.Value
		}
		return ctr.Image, env
	}
	t.Fatalf("%s has no %s %s", path, kind, name)
	return "", nil
}

func TestRenderWritesEveryClusterWithItsOwnIdentity(t *testing.T) {
	out := t.TempDir()
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"-provider=kube", "-clusters=3", "-istio.hub=example.com/hub", "-istio.tag=t1", "-out", out}, &stdout, io.Discard))
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	assert.Contains(t, lines[0], "cacerts: not written")
	assert.Len(t, lines, 1+3*7, "one line per file: 7 components in each of 3 clusters")
	for _, c := range []struct{ name, network string }{{"cluster-1", "network-1"}, {"cluster-2", "network-2"}, {"cluster-3", "network-3"}} {
		dir := filepath.Join(out, c.name)
		for _, f := range []string{"01-gateway-api-crds.yaml", "02-base.yaml", "03-istiod.yaml", "04-cni.yaml", "05-ztunnel.yaml", "06-eastwest-gateway.yaml", "07-probes.yaml"} {
			assert.FileExists(t, filepath.Join(dir, f))
			assert.Contains(t, stdout.String(), filepath.Join(dir, f)+"  (")
		}
		img, env := workload(t, filepath.Join(dir, "03-istiod.yaml"), "Deployment", "istiod")
		assert.Equal(t, "example.com/hub/pilot:t1", img)
		assert.Equal(t, c.name, env["CLUSTER_ID"])
		assert.Equal(t, "true", env["AMBIENT_ENABLE_MULTI_NETWORK"])
		img, env = workload(t, filepath.Join(dir, "05-ztunnel.yaml"), "DaemonSet", "ztunnel")
		assert.Equal(t, "example.com/hub/ztunnel:t1", img)
		assert.Equal(t, c.name, env["ISTIO_META_CLUSTER_ID"])
		assert.Equal(t, c.network, env["NETWORK"])
		for _, o := range decode(t, filepath.Join(dir, "02-base.yaml")) {
			assert.NotEqual(t, "Secret", o.GetKind(), "%s: no key material without -cacerts", c.name)
		}
	}
}

func TestRenderCACertsAndTopologyFile(t *testing.T) {
	dir := t.TempDir()
	topo := filepath.Join(dir, "topology.yaml")
	require.NoError(t, os.WriteFile(topo, []byte("clusters:\n- name: east\n  network: net-e\n- name: west\n  network: net-w\n"), 0o644))
	out := filepath.Join(dir, "out")
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"-provider=kind", "-topology", topo, "-istio.hub=example.com/hub", "-istio.tag=t1", "-istio.variant=distroless", "-cacerts", "-probes=false", "-out", out}, &stdout, io.Discard))
	assert.Contains(t, stdout.String(), "cacerts: written")
	assert.Contains(t, stdout.String(), filepath.Join(out, "west", "kind-config.yaml"), "the kind config is written")
	img, env := workload(t, filepath.Join(out, "west", "05-ztunnel.yaml"), "DaemonSet", "ztunnel")
	assert.Equal(t, "example.com/hub/ztunnel:t1-distroless", img)
	assert.Equal(t, "west", env["ISTIO_META_CLUSTER_ID"])
	assert.Equal(t, "net-w", env["NETWORK"])
	base := filepath.Join(out, "east", "02-base.yaml")
	info, err := os.Stat(base)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the CA key is private")
	var secrets []string
	for _, o := range decode(t, base) {
		if o.GetKind() == "Secret" {
			secrets = append(secrets, o.GetName())
		}
	}
	assert.Equal(t, []string{"cacerts"}, secrets)
	assert.NoFileExists(t, filepath.Join(out, "east", "07-probes.yaml"))
}

func TestRenderFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-istio.tag=t1"}, "-istio.hub is required"},
		{[]string{"-istio.hub=example.com/hub"}, "-istio.tag is required"},
		{[]string{"-provider=local", "-istio.hub=h", "-istio.tag=t"}, "-provider=local: the local provider applies nothing from manifests"},
		{[]string{"-provider=gke", "-istio.hub=h", "-istio.tag=t"}, "-provider=gke: choose kube or kind"},
		{[]string{"-clusters=0", "-istio.hub=h", "-istio.tag=t", "-out", t.TempDir()}, "-clusters"},
		{[]string{"-topology=/nonexistent.yaml", "-istio.hub=h", "-istio.tag=t", "-out", t.TempDir()}, "check the path given to -topology"},
		{[]string{"-istio.hub=h", "-istio.tag=t", "extra"}, `unexpected argument "extra"`},
		{[]string{"-istio.hub=h", "-istio.tag=t", "-istio.platform=eks"}, "-istio.platform=eks: not one of Istio's platforms (gke, k3d, k3s, microk8s, minikube, openshift)"},
		{[]string{"-provider=kind", "-istio.hub=h", "-istio.tag=t", "-istio.platform=gke"}, "-istio.platform=gke: kind clusters need no platform settings"},
	} {
		err := run(tc.args, io.Discard, io.Discard)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want, tc.args)
	}
}

// The done-when line: -istio.platform=gke writes istio-cni with GKE's paths, where istioctl on GKE
// puts it (kube-system).
func TestRenderGKEPlatform(t *testing.T) {
	out := t.TempDir()
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"-provider=kube", "-clusters=2", "-istio.platform=gke", "-istio.hub=example.com/hub", "-istio.tag=t1", "-out", out}, &stdout, io.Discard))
	assert.Contains(t, stdout.String(), "istio platform: gke")
	for _, c := range []string{"cluster-1", "cluster-2"} {
		var ds *appsv1.DaemonSet
		for _, o := range decode(t, filepath.Join(out, c, "04-cni.yaml")) {
			if o.GetKind() == "DaemonSet" && o.GetName() == "istio-cni-node" {
				ds = &appsv1.DaemonSet{}
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds))
			}
		}
		require.NotNil(t, ds, "%s: istio-cni-node rendered", c)
		assert.Equal(t, "kube-system", ds.Namespace)
		paths := map[string]string{}
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.HostPath != nil {
				paths[v.Name] = v.HostPath.Path
			}
		}
		assert.Equal(t, "/home/kubernetes/bin", paths["cni-bin-dir"], "%s: GKE keeps CNI binaries there", c)
		assert.Equal(t, "/etc/cni/net.d", paths["cni-net-dir"])
	}
}
