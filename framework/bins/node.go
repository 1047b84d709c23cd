package bins

import "time"

// The binaries of a kind node and of the images it preloads (`make images`), each from the
// module that pins it: Kubernetes from scripts/kubebin, Istio's from its wrapper under
// scripts/istiod, the rest from scripts/nodebin/*.
const (
	Kubelet        Binary = "kubelet"
	Kubeadm        Binary = "kubeadm"
	Kubectl        Binary = "kubectl"
	KubeScheduler  Binary = "kube-scheduler"
	KubeProxy      Binary = "kube-proxy"
	Containerd     Binary = "containerd"
	ContainerdShim Binary = "containerd-shim-runc-v2"
	Ctr            Binary = "ctr"
	Crictl         Binary = "crictl"
	CNIBridge      Binary = "bridge"
	CNIHostLocal   Binary = "host-local"
	CNILoopback    Binary = "loopback"
	CNIPortmap     Binary = "portmap"
	CoreDNS        Binary = "coredns"
	Pause          Binary = "pause"
	MetalLBCtl     Binary = "controller"
	MetalLBSpeaker Binary = "speaker"
	InstallCNI     Binary = "install-cni"
	IstioCNI       Binary = "istio-cni"
	Fortio         Binary = "fortio"
	// Registry is not in a node: -kind.registry runs it in a container of its own beside them.
	Registry Binary = "registry"
)

// NodeBinaries are every binary `make images` puts into the node image or its preloaded images.
var NodeBinaries = []Binary{
	Etcd, KubeAPIServer, KubeControllerManager, Kubelet, Kubeadm, Kubectl, KubeScheduler, KubeProxy,
	Containerd, ContainerdShim, Ctr, Crictl, CNIBridge, CNIHostLocal, CNILoopback, CNIPortmap,
	CoreDNS, Pause, MetalLBCtl, MetalLBSpeaker, InstallCNI, IstioCNI, Fortio,
}

// containerdTags leave out the snapshotters a kind node does not use, whose cgo parts need C
// headers this host lacks (kind's own build sets the same).
const containerdTags = "no_btrfs no_devmapper no_zfs no_aufs urfave_cli_no_docs"

var nodeRecipes = map[Binary]recipe{
	Kubelet:        {"scripts/kubebin", "k8s.io/kubernetes/cmd/kubelet", 5 * time.Minute, "k8s.io/kubernetes", ""},
	Kubeadm:        {"scripts/kubebin", "k8s.io/kubernetes/cmd/kubeadm", 3 * time.Minute, "k8s.io/kubernetes", ""},
	Kubectl:        {"scripts/kubebin", "k8s.io/kubernetes/cmd/kubectl", 2 * time.Minute, "k8s.io/kubernetes", ""},
	KubeScheduler:  {"scripts/kubebin", "k8s.io/kubernetes/cmd/kube-scheduler", 2 * time.Minute, "k8s.io/kubernetes", ""},
	KubeProxy:      {"scripts/kubebin", "k8s.io/kubernetes/cmd/kube-proxy", 2 * time.Minute, "k8s.io/kubernetes", ""},
	Containerd:     {"scripts/nodebin/containerd", "github.com/containerd/containerd/v2/cmd/containerd", 2 * time.Minute, "", containerdTags},
	ContainerdShim: {"scripts/nodebin/containerd", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", time.Minute, "", containerdTags},
	Ctr:            {"scripts/nodebin/containerd", "github.com/containerd/containerd/v2/cmd/ctr", time.Minute, "", containerdTags},
	Crictl:         {"scripts/nodebin/crictl", "sigs.k8s.io/cri-tools/cmd/crictl", time.Minute, "", ""},
	CNIBridge:      {"scripts/nodebin/cniplugins", "github.com/containernetworking/plugins/plugins/main/bridge", 30 * time.Second, "", ""},
	CNIHostLocal:   {"scripts/nodebin/cniplugins", "github.com/containernetworking/plugins/plugins/ipam/host-local", 10 * time.Second, "", ""},
	CNILoopback:    {"scripts/nodebin/cniplugins", "github.com/containernetworking/plugins/plugins/main/loopback", 10 * time.Second, "", ""},
	CNIPortmap:     {"scripts/nodebin/cniplugins", "github.com/containernetworking/plugins/plugins/meta/portmap", 10 * time.Second, "", ""},
	CoreDNS:        {"scripts/nodebin/coredns", "github.com/ambientmc/ambientmc/scripts/nodebin/coredns", 90 * time.Second, "", ""},
	Pause:          {"scripts/nodebin/pause", "github.com/ambientmc/ambientmc/scripts/nodebin/pause", 5 * time.Second, "", ""},
	MetalLBCtl:     {"scripts/nodebin/metallb", "go.universe.tf/metallb/controller", time.Minute, "", ""},
	MetalLBSpeaker: {"scripts/nodebin/metallb", "go.universe.tf/metallb/speaker", time.Minute, "", ""},
	// Istio's CNI from the pinned istio.io/istio, through pilot-discovery's wrapper module.
	InstallCNI: {"", "istio.io/istio/cni/cmd/install-cni", 4 * time.Minute, istioModule, ""},
	IstioCNI:   {"", "istio.io/istio/cni/cmd/istio-cni", time.Minute, istioModule, ""},
	Fortio:     {"scripts/nodebin/fortio", "github.com/ambientmc/ambientmc/scripts/nodebin/fortio", time.Minute, "", ""},
	// Static (no cgo resolver), as its image has no base.
	Registry: {"scripts/nodebin/registry", "github.com/ambientmc/ambientmc/scripts/nodebin/registry", 2 * time.Minute, "", "netgo osusergo"},
}
