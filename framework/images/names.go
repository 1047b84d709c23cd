// Package images names and builds every image a kind run needs, from the pinned sources and the
// distribution's packages, with nothing pulled (`make images`): a kind node image for the pinned
// Kubernetes with the control plane, etcd, CoreDNS, pause, MetalLB, Istio's pilot and install-cni,
// and the probes' fortio preloaded; and beside it an archive of the emulated data plane in place of
// Istio's ztunnel and proxyv2, which the kind provider loads into the nodes.
// The kind provider finds the images through Expected, without flags.
package images

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/gomod"
)

const (
	// NodeRepo is the node image's repository; its tag is the Kubernetes version (the kind
	// provider reads the kubeadm API from it).
	NodeRepo = "ambientmc.local/kind-node"
	// IstioHub is the hub of the Istio images make images builds.
	IstioHub = "ambientmc.local/istio"
	// KeyLabel carries the content key a node image was built from.
	KeyLabel = "io.ambientmc.images.key"
	// PreloadLabel lists, comma-separated, the images preloaded into a node image.
	PreloadLabel = "io.ambientmc.images.preloaded"
	// scheme changes whenever the builder lays images out differently.
	scheme = "node-image/6"
	// dataPlaneScheme changes whenever the data plane's archive is laid out differently.
	dataPlaneScheme = "dataplane-archive/2"
	// RegistryRepo is the repository of the registry image -kind.registry runs; registryScheme
	// changes whenever it is laid out differently.
	RegistryRepo   = "ambientmc.local/registry"
	registryScheme = "registry-image/1"
)

//go:embed files
var files embed.FS

// Set is what make images builds, named.
type Set struct {
	// Node is the node image reference, e.g. ambientmc.local/kind-node:v1.36.1.
	Node string
	// Kubernetes is the pinned Kubernetes version.
	Kubernetes string
	// IstioHub and IstioTag name the Istio images preloaded in the node.
	IstioHub, IstioTag string
	// Key is the content key: the node image is current when its KeyLabel equals it.
	Key string
	// Istio is the istio.io/istio module version the Istio images are built from.
	Istio string
	// Probe is the probe pods' fortio image, e.g. fortio/fortio:1.75.3 (the name the probes ask for).
	Probe string
	// DataPlane is the archive of the emulated data plane's images (ztunnel and proxyv2 under
	// IstioHub and IstioTag), named by the emulator's own key: not in the node image, a kind
	// cluster loads it into its nodes when it starts.
	DataPlane string
	// Registry is the registry image (distribution's, filesystem storage, on port 5000) that
	// -kind.registry runs beside the nodes, in Docker's image store, named by its binary's key.
	Registry string
}

// Expected works out the names and content key of the images from the pinned sources, without
// building anything.
func Expected(c *bins.Cache) (Set, error) {
	k8s, err := gomod.Required(filepath.Join(c.SrcRoot, "scripts", "kubebin", "go.mod"), "k8s.io/kubernetes")
	if err != nil {
		return Set{}, fmt.Errorf("pinned Kubernetes: %w", err)
	}
	istio, err := c.PinnedIstio()
	if err != nil {
		return Set{}, err
	}
	h := sha256.New()
	fmt.Fprintln(h, scheme, k8s, istio, strings.Join(rootfsPackages, ","))
	for _, b := range append(append([]bins.Binary{}, bins.NodeBinaries...), bins.PilotDiscovery) {
		p, err := c.Path(b)
		if err != nil {
			return Set{}, err
		}
		// The cache path holds the binary's own key (its module's go.mod and go.sum, Go, platform).
		fmt.Fprintln(h, filepath.Base(filepath.Dir(p)))
	}
	for _, f := range []string{"files/node-guard.sh", "files/build-node.sh"} {
		data, err := files.ReadFile(f)
		if err != nil {
			return Set{}, err
		}
		h.Write(data)
	}
	fortio, err := gomod.Required(filepath.Join(c.SrcRoot, "scripts", "nodebin", "fortio", "go.mod"), "fortio.org/fortio")
	if err != nil {
		return Set{}, fmt.Errorf("the probes' fortio: %w", err)
	}
	kindVersion, err := gomod.Required(filepath.Join(c.SrcRoot, "go.mod"), "sigs.k8s.io/kind")
	if err != nil {
		return Set{}, err
	}
	fmt.Fprintln(h, kindVersion)
	dp, err := dataPlaneKey(c.SrcRoot)
	if err != nil {
		return Set{}, err
	}
	dpArchive := sha256.Sum256([]byte(dataPlaneScheme + "\n" + dp))
	reg, err := c.Path(bins.Registry)
	if err != nil {
		return Set{}, err
	}
	regKey := sha256.Sum256([]byte(registryScheme + "\n" + filepath.Base(filepath.Dir(reg))))
	return Set{
		Registry:   RegistryRepo + ":" + hex.EncodeToString(regKey[:])[:12],
		DataPlane:  filepath.Join(c.Dir, "images", dataPlaneArchivePrefix+hex.EncodeToString(dpArchive[:])[:16]+".tar"),
		Node:       NodeRepo + ":" + k8s,
		Kubernetes: k8s,
		IstioHub:   IstioHub,
		IstioTag:   IstioTag(istio),
		Istio:      istio,
		Key:        hex.EncodeToString(h.Sum(nil))[:16],
		Probe:      "fortio/fortio:" + strings.TrimPrefix(fortio, "v"),
	}, nil
}

// IstioTag is the image tag for an istio.io/istio module version: the commit of a pseudo-version
// (v0.0.0-20260827124520-eed52ebb66ad gives eed52ebb66ad), else the version without its v.
func IstioTag(version string) string {
	if i := strings.LastIndexByte(version, '-'); i >= 0 && len(version)-i-1 == 12 {
		return version[i+1:]
	}
	return strings.TrimPrefix(version, "v")
}

// Default is Expected for the default binary cache ($AMBIENTMC_CACHE) of this checkout.
func Default() (Set, error) {
	c, err := bins.Default()
	if err != nil {
		return Set{}, err
	}
	return Expected(c)
}
