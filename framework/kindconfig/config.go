// Package kindconfig is a kind cluster's configuration: the address plan (pod, service and node
// ranges, LoadBalancer pools cut from the kind Docker network), the kind Config with its kubeadm
// patches and node.env, and the Kubernetes version of a node image.
package kindconfig

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/ambientmc/ambientmc/topology"
)

// DefaultImage is kind v0.33's default node image (sigs.k8s.io/kind/pkg/apis/config/defaults).
const DefaultImage = "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"

// NamePrefix starts the kind name of every cluster the framework creates, so its clusters stand
// apart from the user's own (cluster-1 becomes ambientmc-cluster-1).
const NamePrefix = "ambientmc-"

// KindName is the kind cluster name of topology cluster name.
func KindName(name string) string { return NamePrefix + name }

// The address plan. Cluster index i runs from 1 to MaxClusters; nothing overlaps kind's defaults
// (10.244.0.0/16 pods, 10.96.0.0/16 services) or docker's default address pools (172.17-31/16,
// 192.168/16), where the kind network lives.
//
//	pods:     10.(10+i).0.0/16   10.11.0.0/16 .. 10.60.0.0/16
//	services: 10.(100+i).0.0/20  10.101.0.0/20 .. 10.150.0.0/20 (4094 ClusterIPs each)
//
// Every cluster gets its own ranges, as Istio's CI topologies do: they allow flat-network
// topologies and keep addresses unambiguous in istiod's and ztunnel's logs.
const (
	nodeCIDRBits     = 22
	MaxClusters      = 50
	podOctetBase     = 10
	serviceOctetBase = 100
	serviceBits      = 20
	// MaxClustersReason says why no more than MaxClusters clusters fit (the kind provider's
	// topology.Capabilities).
	MaxClustersReason = "its address plan (pods 10.(10+i).0.0/16, services 10.(100+i).0.0/20) has room for 50"
)

// PodSubnet is cluster i's pod range, 10.(10+i).0.0/16.
func PodSubnet(i int) (netip.Prefix, error) {
	if i < 1 || i > MaxClusters {
		return netip.Prefix{}, fmt.Errorf("kind address plan: cluster index %d out of range 1..%d", i, MaxClusters)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(podOctetBase + i), 0, 0}), 16), nil
}

// ServiceSubnet is cluster i's ClusterIP range, 10.(100+i).0.0/20.
func ServiceSubnet(i int) (netip.Prefix, error) {
	if i < 1 || i > MaxClusters {
		return netip.Prefix{}, fmt.Errorf("kind address plan: cluster index %d out of range 1..%d", i, MaxClusters)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(serviceOctetBase + i), 0, 0}), serviceBits), nil
}

// imageTagRE matches a node image tag that names a Kubernetes version: v1.35.0, v1.36.1-rc.0.
var imageTagRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)([-+][0-9A-Za-z.+-]*)?$`)

// KubernetesVersion reads the Kubernetes version (major, minor) from a node image's tag,
// e.g. kindest/node:v1.35.0@sha256:... gives 1, 35.
func KubernetesVersion(image string) (major, minor int, err error) {
	ref := image
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	tag := ""
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		tag = ref[i+1:]
	}
	m := imageTagRE.FindStringSubmatch(tag)
	if m == nil {
		return 0, 0, fmt.Errorf("-kind.image=%s: cannot read the Kubernetes version from the tag %q: kind renders kubeadm v1beta3 below 1.36 and v1beta4 from 1.36, so the framework needs it; use a node image tagged vMAJOR.MINOR.PATCH (e.g. %s)", image, tag, DefaultImage)
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, nil
}

// KubeadmAPIVersion is the kubeadm config API kind v0.33 renders for image: v1beta3 below
// Kubernetes 1.36, v1beta4 from 1.36 (sigs.k8s.io/kind/pkg/cluster/internal/kubeadm/config.go).
// Patches naming another apiVersion would be skipped silently.
func KubeadmAPIVersion(image string) (string, error) {
	major, minor, err := KubernetesVersion(image)
	if err != nil {
		return "", err
	}
	switch {
	case major == 1 && minor < 23:
		return "", fmt.Errorf("-kind.image=%s: Kubernetes 1.%d is older than kind v0.33's kubeadm v1beta3 (1.23); use an image of Kubernetes 1.32 or later", image, minor)
	case major == 1 && minor < 36:
		return "kubeadm.k8s.io/v1beta3", nil
	default:
		return "kubeadm.k8s.io/v1beta4", nil
	}
}

// kubeadmPatch is the ClusterConfiguration patch every node gets, as Istio's CI sets it
// (prow/config/default.yaml): etcd on the node's /tmp (a tmpfs in kind nodes: etcd disk I/O is the
// usual limit with many clusters on one host) and no leader election in a single-node cluster.
// Node IPAM hands each node a /22 instead of kubeadm's /24: fake pods take addresses from their
// fake node's podCIDR, and published scale puts 267 on each of 15 nodes (the /16 holds 64 nodes).
// v1beta4 spells extraArgs as a list of name/value pairs.
func kubeadmPatch(apiVersion string) string {
	args := func(indent string, kv ...string) string {
		out := indent + "extraArgs:\n"
		for i := 0; i < len(kv); i += 2 {
			if apiVersion == "kubeadm.k8s.io/v1beta3" {
				out += indent + "  " + kv[i] + ": \"" + kv[i+1] + "\"\n"
			} else {
				out += indent + "  - name: " + kv[i] + "\n" + indent + "    value: \"" + kv[i+1] + "\"\n"
			}
		}
		return out
	}
	return "apiVersion: " + apiVersion + "\n" +
		"kind: ClusterConfiguration\n" +
		"metadata:\n  name: config\n" +
		"etcd:\n  local:\n    dataDir: /tmp/kind-cluster-etcd\n" +
		"controllerManager:\n" + args("  ", "leader-elect", "false", "node-cidr-mask-size", strconv.Itoa(nodeCIDRBits)) +
		"scheduler:\n" + args("  ", "leader-elect", "false")
}

// kubeadmTimeoutsPatch gives kubeadm init's API calls 4 minutes instead of 1. Its first call,
// the admin user's ClusterRoleBinding, starts with the kubelet: it is the API server's whole
// start-up that must fit, and with three clusters starting at once on two cores it took more than a
// minute (docs/providers.md#the-kind-provider). v1beta3 has no timeouts: its 1 minute is fixed.
const kubeadmTimeoutsPatch = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nmetadata:\n  name: config\ntimeouts:\n  kubernetesAPICall: 4m0s\n"

// Node is what Config needs to know of a cluster's node (the kind provider's options).
type Node struct {
	// Image is the node image; "" means DefaultImage.
	Image string
	// CgroupV1 says the host runs cgroup v1, which kubelet 1.35+ refuses unless told otherwise.
	CgroupV1 bool
	// Guarded says the node image carries the framework's egress guard (framework/images): its
	// clusters then run the guard's bridge CNI instead of kindnetd, with a per-cluster node.env.
	Guarded bool
	// RunDir is the run directory, where a Guarded cluster's node.env is (NodeEnvPath).
	RunDir string
	// Registry points containerd at per-host registry configuration (certs.d), where a run's
	// registry becomes each image host's mirror (framework/localregistry).
	Registry bool
}

// registryPatch is containerd's per-host registry configuration, as kind's local-registry guide
// sets it.
const registryPatch = "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n"

// Config renders the kind config of topology cluster tc: one control-plane node of o.Image, the
// cluster's own pod and service subnets, and kubeadm patches for the image's kubeadm API. The API
// server's host port is left to the caller (the kind provider's Create). Each call returns a
// fresh struct (kind mutates it).
func Config(tc topology.Cluster, o Node) (*v1alpha4.Cluster, error) {
	image := o.Image
	if image == "" {
		image = DefaultImage
	}
	api, err := KubeadmAPIVersion(image)
	if err != nil {
		return nil, err
	}
	// The node's container name becomes its hostname and Kubernetes node name: a DNS label.
	if node := KindName(tc.Name) + "-control-plane"; len(node) > 63 {
		return nil, fmt.Errorf("cluster %s: its kind node would be named %s, longer than the 63 characters of a hostname; use a cluster name of at most %d characters", tc.Name, node, 63-len(NamePrefix)-len("-control-plane"))
	}
	pods, err := PodSubnet(tc.Index)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", tc.Name, err)
	}
	svcs, err := ServiceSubnet(tc.Index)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", tc.Name, err)
	}
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     KindName(tc.Name),
		Nodes: []v1alpha4.Node{{
			Role:   v1alpha4.ControlPlaneRole,
			Image:  image,
			Labels: map[string]string{"ambientmc.io/cluster": tc.Name},
		}},
		Networking: v1alpha4.Networking{
			IPFamily:      v1alpha4.IPv4Family,
			PodSubnet:     pods.String(),
			ServiceSubnet: svcs.String(),
		},
		KubeadmConfigPatches: []string{kubeadmPatch(api)},
	}
	if api == "kubeadm.k8s.io/v1beta4" {
		cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches, kubeadmTimeoutsPatch)
	}
	if major, minor, _ := KubernetesVersion(image); o.CgroupV1 && (major > 1 || minor >= 35) {
		// kubelet 1.35+ refuses a cgroup v1 host unless its configuration allows it.
		cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches, "kind: KubeletConfiguration\nfailCgroupV1: false\n")
	}
	if o.Registry {
		cfg.ContainerdConfigPatches = append(cfg.ContainerdConfigPatches, registryPatch)
	}
	if o.Guarded {
		// The guard's bridge CNI replaces kindnetd, which routes every other node's podCIDR via
		// its InternalIP and fails on the framework's fake nodes (their addresses are not on-link).
		cfg.Networking.DisableDefaultCNI = true
		cfg.Nodes[0].ExtraMounts = []v1alpha4.Mount{{HostPath: NodeEnvPath(o.RunDir, tc.Name), ContainerPath: nodeEnvInNode, Readonly: true}}
	}
	return cfg, nil
}

// nodeEnvInNode is where the framework's node image reads its settings (framework/images).
const nodeEnvInNode = "/etc/ambientmc/node.env"

// NodeEnvPath is cluster name's node settings file in the run directory.
func NodeEnvPath(runDir, name string) string { return filepath.Join(runDir, name, "node.env") }

// NodeRange is the pod range of a cluster's one real node: the first /22 of its pod subnet,
// which node IPAM hands the first node to register (kubeadmPatch's node-cidr-mask-size).
func NodeRange(i int) (netip.Prefix, error) {
	pods, err := PodSubnet(i)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(pods.Addr(), nodeCIDRBits), nil
}

// guardAllows are the destinations the node guard lets through besides loopback: the address
// plan's pod and service ranges (10.11-10.60 and 10.101-10.150 within 10.0.0.0/9 and
// 10.128.0.0/11) and the run network.
func guardAllows(subnet netip.Prefix) []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("10.0.0.0/9"), netip.MustParsePrefix("10.128.0.0/11"), subnet}
}

// NodeEnv is the content of a cluster's node.env: the node's pod range, the run network, and
// what the guard allows.
func NodeEnv(i int, subnet netip.Prefix) (string, error) {
	r, err := NodeRange(i)
	if err != nil {
		return "", err
	}
	var allow []string
	for _, a := range guardAllows(subnet) {
		allow = append(allow, a.String())
	}
	return fmt.Sprintf("POD_RANGE=%s\nNODE_NETWORK=%s\nALLOW=%q\n", r, subnet, strings.Join(allow, " ")), nil
}

// ConfigYAML serialises a kind config as kind reads it (CreateWithRawConfig, `kind create
// cluster --config`).
func ConfigYAML(cfg *v1alpha4.Cluster) ([]byte, error) { return yaml.Marshal(cfg) }

// DecodeConfig decodes a kind config strictly (unknown fields are errors), as kind does.
func DecodeConfig(data []byte) (*v1alpha4.Cluster, error) {
	cfg := &v1alpha4.Cluster{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, err
	}
	if cfg.Kind != "Cluster" || cfg.APIVersion != "kind.x-k8s.io/v1alpha4" {
		return nil, fmt.Errorf("kind config: want kind: Cluster, apiVersion: kind.x-k8s.io/v1alpha4, got %q, %q", cfg.Kind, cfg.APIVersion)
	}
	return cfg, nil
}
