package install

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"istio.io/istio/manifests"

	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/topology"
)

// renderedCNI is what the istio-cni chart rendered for platform: the node DaemonSet's host paths
// by volume name, its ConfigMap data, the namespaces of the cni and ztunnel DaemonSets, and the
// kinds rendered.
type renderedCNI struct {
	hostPaths            map[string]string
	config               map[string]string
	cniNS, ztunnelNS     string
	kinds                map[string]bool
	networkAttachmentDef bool
}

func renderPlatform(t *testing.T, platform string) renderedCNI {
	t.Helper()
	topo, err := topology.Generate(1)
	require.NoError(t, err)
	root, err := pki.NewRoot()
	require.NoError(t, err)
	ca, err := root.NewIntermediate(topo.Clusters[0].Name)
	require.NoError(t, err)
	m, err := Render(Options{Cluster: topo.Clusters[0], Images: Images{Hub: testHub, Tag: testTag}, CACerts: ca, Platform: platform})
	require.NoError(t, err)
	r := renderedCNI{hostPaths: map[string]string{}, config: map[string]string{}, kinds: map[string]bool{}}
	for _, o := range m.Component(ComponentCNI).Objects {
		r.kinds[o.GetKind()] = true
		switch {
		case o.GetKind() == "DaemonSet" && o.GetName() == "istio-cni-node":
			r.cniNS = o.GetNamespace()
			var ds appsv1.DaemonSet
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds))
			for _, v := range ds.Spec.Template.Spec.Volumes {
				if v.HostPath != nil {
					r.hostPaths[v.Name] = v.HostPath.Path
				}
			}
		case o.GetKind() == "ConfigMap" && o.GetName() == "istio-cni-config":
			r.config, _, _ = unstructured.NestedStringMap(o.Object, "data")
		case o.GetKind() == "NetworkAttachmentDefinition":
			r.networkAttachmentDef = true
		}
	}
	for _, o := range m.Component(ComponentZtunnel).Objects {
		if o.GetKind() == "DaemonSet" {
			r.ztunnelNS = o.GetNamespace()
		}
	}
	return r
}

// istioCNIProfile is the cni section of Istio's own platform profile, as the pinned charts embed it.
func istioCNIProfile(t *testing.T, platform string) map[string]any {
	t.Helper()
	data, err := fs.ReadFile(manifests.BuiltinOrDir(""), "charts/istio-cni/files/profile-platform-"+platform+".yaml")
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, yaml.Unmarshal(data, &p))
	cni, _ := p["cni"].(map[string]any)
	require.NotEmpty(t, cni, "Istio's %s profile has CNI settings", platform)
	return cni
}

// checkAgainstProfile checks every CNI setting of Istio's profile in the rendered istio-cni.
func checkAgainstProfile(t *testing.T, r renderedCNI, cni map[string]any) {
	t.Helper()
	volumes := map[string]string{"cniBinDir": "cni-bin-dir", "cniConfDir": "cni-net-dir", "cniNetnsDir": "cni-netns-dir"}
	for key, want := range cni {
		switch key {
		case "cniBinDir", "cniConfDir", "cniNetnsDir":
			if want != "" {
				assert.Equal(t, want, r.hostPaths[volumes[key]], "%s: host path of volume %s", key, volumes[key])
			}
		case "chained":
			assert.Equal(t, "false", r.config["CHAINED_CNI_PLUGIN"], key)
		case "cniConfFileName":
			assert.Equal(t, want, r.config["CNI_CONF_NAME"], key)
		case "provider":
			assert.Equal(t, want == "multus", r.networkAttachmentDef, "provider %v renders a NetworkAttachmentDefinition", want)
		case "resourceQuotas":
			// gke: see TestRenderGKEAsIstioctlOnGKE
		default:
			t.Errorf("Istio's profile sets cni.%s, which this test does not check yet", key)
		}
	}
}

func TestRenderPlatformsFollowIstiosProfiles(t *testing.T) {
	plain := renderPlatform(t, "")
	assert.Equal(t, "/opt/cni/bin", plain.hostPaths["cni-bin-dir"], "the chart's default, which every platform below changes")
	assert.Equal(t, "/etc/cni/net.d", plain.hostPaths["cni-net-dir"])

	t.Run("k3s", func(t *testing.T) {
		r := renderPlatform(t, "k3s")
		checkAgainstProfile(t, r, istioCNIProfile(t, "k3s"))
		assert.Equal(t, "/var/lib/rancher/k3s/data/cni", r.hostPaths["cni-bin-dir"])
		assert.Equal(t, "istio-system", r.cniNS)
	})
	t.Run("openshift", func(t *testing.T) {
		r := renderPlatform(t, "openshift")
		checkAgainstProfile(t, r, istioCNIProfile(t, "openshift"))
		assert.Equal(t, "/var/lib/cni/bin", r.hostPaths["cni-bin-dir"])
		// Istio's openshift-ambient profile: privileged node agents go to kube-system.
		assert.Equal(t, "kube-system", r.cniNS)
		assert.Equal(t, "kube-system", r.ztunnelNS)
	})
	t.Run("gke", func(t *testing.T) {
		r := renderPlatform(t, "gke")
		checkAgainstProfile(t, r, istioCNIProfile(t, "gke"))
		// The profile leaves cniBinDir empty for the chart to detect GKE from the version; istioctl
		// on GKE (clusterSpecificSettings) also moves istio-cni to kube-system without a quota.
		assert.Equal(t, gkeCNIBinDir, r.hostPaths["cni-bin-dir"])
		assert.Equal(t, "kube-system", r.cniNS)
		assert.False(t, r.kinds["ResourceQuota"], "kube-system's own quota admits node-critical pods")
		assert.Equal(t, "istio-system", r.ztunnelNS)
	})
}

func TestUnknownPlatformIsOneErrorNamingTheFlag(t *testing.T) {
	err := CheckPlatform("eks")
	require.Error(t, err)
	assert.Equal(t, "-istio.platform=eks: not one of Istio's platforms (gke, k3d, k3s, microk8s, minikube, openshift); leave it empty for clusters that need no platform settings", err.Error())
	assert.NoError(t, CheckPlatform(""))
	for _, p := range Platforms() {
		assert.NoError(t, CheckPlatform(p))
	}
}
