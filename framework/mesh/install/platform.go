package install

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"istio.io/istio/manifests"
)

// Platforms are Istio's platform names: those the istio-cni chart has a profile for
// (manifests/charts/istio-cni/files/profile-platform-<name>.yaml, which its zzz_profile.yaml merges
// for global.platform and which fails the render on any other name), read from the pinned
// module's embedded charts.
func Platforms() []string {
	platforms.once.Do(func() {
		paths, _ := fs.Glob(manifests.BuiltinOrDir(""), "charts/istio-cni/files/profile-platform-*.yaml")
		for _, p := range paths {
			name := strings.TrimSuffix(strings.TrimPrefix(p, "charts/istio-cni/files/profile-platform-"), ".yaml")
			platforms.names = append(platforms.names, name)
		}
		slices.Sort(platforms.names)
	})
	return platforms.names
}

var platforms struct {
	once  sync.Once
	names []string
}

// CheckPlatform refuses a name that is not one of Istio's platforms, naming the flag.
func CheckPlatform(name string) error {
	if name == "" || slices.Contains(Platforms(), name) {
		return nil
	}
	return fmt.Errorf("-istio.platform=%s: not one of Istio's platforms (%s); leave it empty for clusters that need no platform settings",
		name, strings.Join(Platforms(), ", "))
}

// gkeCNIBinDir is where GKE nodes keep CNI binaries. The istio-cni chart picks it only when the
// render sees a "-gke" Kubernetes version (its daemonset.yaml $detectedBinDir; the gke profile
// leaves cniBinDir empty for that), which a render without a cluster never sees.
const gkeCNIBinDir = "/home/kubernetes/bin"

// withPlatform applies platform to the IstioOperator spec as istioctl install does on that
// platform (operator/pkg/render/manifest.go), so that the render needs no cluster:
//   - every platform: values.global.platform, which the charts' zzz_profile.yaml expand into the
//     platform profile (manifests/helm-profiles/platform-<name>.yaml: CNI paths and the like);
//   - openshift: Istio's own openshift-ambient profile (the one istioctl's docs install), which
//     also moves istio-cni and ztunnel to kube-system, where OpenShift allows privileged pods;
//   - gke: what clusterSpecificSettings adds when it detects GKE (istio-cni in kube-system, whose
//     ResourceQuota admits system-node-critical pods, so no quota of its own) and GKE's CNI
//     binary directory, which the chart would detect from the version.
func withPlatform(spec map[string]any, platform string) {
	if platform == "" {
		return
	}
	values := spec["values"].(map[string]any)
	values["global"].(map[string]any)["platform"] = platform
	cni := values["cni"].(map[string]any)
	switch platform {
	case "openshift":
		spec["profile"] = "openshift-ambient"
	case "gke":
		spec["components"] = map[string]any{"cni": map[string]any{"namespace": "kube-system"}}
		cni["resourceQuotas"] = map[string]any{"enabled": false}
		cni["cniBinDir"] = gkeCNIBinDir
	}
}
