// Command render writes, per cluster, every manifest the framework would apply to a kind or kube
// cluster, with the same code (framework/mesh/install.Render):
//
//	go run ./scripts/render -provider=kube -clusters=3 -istio.hub=H -istio.tag=T -out D
//	go run ./scripts/render -provider=kube -clusters=2 -istio.platform=gke -istio.hub=H -istio.tag=T
//
// writes D/<cluster>/NN-<component>.yaml and prints one line per file. The CA is a throwaway one
// made for this run; its key material is written only with -cacerts.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/topology"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "render:", err)
		}
		os.Exit(2)
	}
}

type options struct {
	provider, topology, out string
	clusters                int
	images                  install.Images
	meshID, platform        string
	cacerts, probes         bool
	kindImage, kindSubnet   string
	kindSubnetSet           bool // -kind.subnet was given
	createNetwork           bool
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.provider, "provider", "kube", "kube or kind: the provider whose install is rendered (kind also gets its kind config and MetalLB pool)")
	fs.IntVar(&o.clusters, "clusters", 2, "number of clusters: cluster-1..N, each a primary on its own network (ignored with -topology)")
	fs.StringVar(&o.topology, "topology", "", "topology file: ambientmc YAML/JSON or Istio's prow topology JSON (overrides -clusters)")
	fs.StringVar(&o.images.Hub, "istio.hub", "", "image hub of istiod, istio-cni and ztunnel (required), e.g. registry.istio.io/testing")
	fs.StringVar(&o.images.Tag, "istio.tag", "", "image tag (required), e.g. 1.31-dev or a full commit SHA")
	fs.StringVar(&o.images.Variant, "istio.variant", "", `image variant: "" for the plain tag, or e.g. distroless`)
	fs.StringVar(&o.meshID, "mesh.id", install.DefaultMeshID, "mesh ID")
	fs.StringVar(&o.platform, "istio.platform", "", "kube: Istio's platform settings ("+strings.Join(install.Platforms(), ", ")+"), as istioctl install applies them; empty for none")
	fs.StringVar(&o.out, "out", filepath.Join("_output", "render"), "output directory; each cluster gets a subdirectory")
	fs.BoolVar(&o.cacerts, "cacerts", false, "also write each cluster's istio-system/cacerts Secret, private key included, from a throwaway root CA")
	fs.StringVar(&o.kindImage, "kind.image", kindconfig.DefaultImage, "kind: node image (its tag's Kubernetes version picks the kubeadm patch API)")
	fs.StringVar(&o.kindSubnet, "kind.subnet", kindconfig.DefaultNetworkSubnet, "kind: the kind docker network's subnet the MetalLB pools are cut from (default: the live network's, read with docker network inspect kind, else this value)")
	fs.BoolVar(&o.createNetwork, "kind.create-network", false, "kind: create the kind docker network first if it does not exist, as kind's first create would, so the pools come from the subnet Docker gives it")
	fs.BoolVar(&o.probes, "probes", true, "also render the probe workloads (fortio client in the first cluster, echo servers in the first two)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.kindSubnetSet = o.kindSubnetSet || f.Name == "kind.subnet" })
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: every input is a flag (see -help)", fs.Arg(0))
	}
	switch {
	case o.provider == "local":
		return nil, errors.New("-provider=local: the local provider applies nothing from manifests; choose -provider=kube or -provider=kind")
	case o.provider != "kube" && o.provider != "kind":
		return nil, fmt.Errorf("-provider=%s: choose kube or kind", o.provider)
	case o.images.Hub == "":
		return nil, errors.New("-istio.hub is required: the image hub, e.g. -istio.hub=registry.istio.io/testing (there is no default)")
	case o.images.Tag == "":
		return nil, errors.New("-istio.tag is required: the image tag, e.g. -istio.tag=1.31-dev (the pinned module version cannot name one)")
	case o.out == "":
		return nil, errors.New("-out is empty: name the output directory")
	}
	if err := install.CheckPlatform(o.platform); err != nil {
		return nil, err
	}
	if o.provider == "kind" {
		if o.platform != "" {
			return nil, fmt.Errorf("-istio.platform=%s: kind clusters need no platform settings; drop the flag, or render for -provider=kube", o.platform)
		}
		if _, err := kindconfig.KubeadmAPIVersion(o.kindImage); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	var topo *topology.Topology
	if o.topology != "" {
		topo, err = topology.Load(o.topology)
	} else {
		topo, err = topology.Generate(o.clusters)
	}
	if err != nil {
		return err
	}
	var plan map[string]*install.ProbeOptions
	if o.probes {
		client := topo.Clusters[0].Name
		remote, peer := install.ProbeClusters(topo, client)
		if plan, err = install.ProbePlan(topo, client, remote, peer); err != nil {
			return err
		}
	}
	root, err := pki.NewRoot()
	if err != nil {
		return err
	}
	if o.cacerts {
		fmt.Fprintf(stdout, "cacerts: written into each 02-base.yaml (0600), private keys included, from a throwaway root CA made for this run\n")
	} else {
		fmt.Fprintf(stdout, "cacerts: not written (the CA here is throwaway and its keys stay secret): create each cluster's istio-system/cacerts from one shared root, or pass -cacerts\n")
	}
	if o.platform != "" {
		fmt.Fprintf(stdout, "istio platform: %s (Istio's platform profile, applied as istioctl install applies it)\n", o.platform)
	}
	var pools []netip.Prefix
	if o.provider == "kind" {
		net, why, err := kindNetwork(o)
		if err != nil {
			return err
		}
		if pools, err = kindPools(topo, net); err != nil {
			return fmt.Errorf("kind network %s (%s): %w", net.Subnet, why, err)
		}
		fmt.Fprintf(stdout, "kind network: subnet %s (%s); MetalLB pools cut from it\n", net.Subnet, why)
	}
	for _, c := range topo.Clusters {
		ca, err := root.NewIntermediate(c.Name)
		if err != nil {
			return err
		}
		m, err := install.Render(install.Options{Cluster: c, MeshID: o.meshID, Images: o.images, CACerts: ca, Probes: plan[c.Name], Platform: o.platform})
		if err != nil {
			return err
		}
		if !o.cacerts {
			withoutCACerts(m)
		}
		dir := filepath.Join(o.out, c.Name)
		if err := m.WriteDir(dir); err != nil {
			return err
		}
		for i, name := range m.FileNames() {
			fmt.Fprintf(stdout, "%s  (%d objects)\n", filepath.Join(dir, name), len(m.Components[i].Objects))
		}
		if o.provider == "kind" {
			paths, err := writeKindConfig(c, dir, o.kindImage, pools[c.Index-1])
			if err != nil {
				return fmt.Errorf("cluster %s: kind config: %w", c.Name, err)
			}
			for _, p := range paths {
				fmt.Fprintln(stdout, p)
			}
		}
	}
	return nil
}

// withoutCACerts drops the cacerts Secret, the only object holding key material.
func withoutCACerts(m *install.Manifests) {
	base := m.Component(install.ComponentBase)
	kept := base.Objects[:0]
	for _, obj := range base.Objects {
		if obj.GetKind() != "Secret" || obj.GetName() != pki.CACertsSecret {
			kept = append(kept, obj)
		}
	}
	base.Objects = kept
}
