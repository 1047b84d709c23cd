package kube

import (
	"flag"
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/provider"
)

// flagValues are the kube provider's own flags.
type flagValues struct {
	platform   string // -istio.platform
	reuseIstio bool   // -kube.reuse-istio
	// images are -istio.hub, -istio.tag and -istio.variant, which kind reads too (ImageFlagNames).
	images install.Images
}

// ImageFlagNames are the Istio image flags this provider registers, for the providers that install
// Istio through its in-cluster code and read them too (provider.Spec.Reads).
var ImageFlagNames = []string{"istio.hub", "istio.tag", "istio.variant", "istio.dataplane"}

// Name is the provider's -provider value.
const Name = "kube"

var flags flagValues

func init() {
	provider.Register(provider.Spec{
		Name:         Name,
		Summary:      "existing clusters named by -topology",
		Capabilities: capabilities,
		Flags:        flags.register,
		Check:        flags.validate,
		New:          newFromFlags,
	})
}

// newFromFlags builds the provider from the flags: the images they name, else the ones make images
// built (read only then, so existing clusters with real images need no image build here).
func newFromFlags(e provider.Env) (cluster.Provider, error) {
	im := IstioImageFlags()
	if im.Hub == "" && im.Tag == "" {
		built, err := images.Default()
		if err != nil {
			return nil, fmt.Errorf("-provider=%s: the images make images builds: %w", Name, err)
		}
		im = install.OrBuilt(im, built)
	}
	p, err := New(Options{RunDir: e.RunDir, Log: e.Log, Images: im, ReuseIstio: flags.reuseIstio, Platform: flags.platform})
	if err != nil {
		return nil, err // not a nil *Provider in a non-nil interface
	}
	return p.Offered(), nil
}

// IstioImageFlags are the images -istio.hub, -istio.tag and -istio.variant name, for the providers
// that install Istio through this one's in-cluster code (kind).
func IstioImageFlags() install.Images { return flags.images }

func (f *flagValues) register(fs *flag.FlagSet) {
	fs.StringVar(&f.images.Hub, "istio.hub", "", "kube, kind: image hub of istiod, ztunnel, istio-cni and the gateway (with -istio.tag; neither: the images make images builds), e.g. registry.istio.io/testing")
	fs.StringVar(&f.images.Tag, "istio.tag", "", "kube, kind: image tag (with -istio.hub), e.g. 1.31-dev or a full commit SHA")
	fs.StringVar(&f.images.Variant, "istio.variant", "", "kube, kind: image variant: empty for the plain tag, or e.g. distroless")
	fs.StringVar(&f.images.DataPlane, "istio.dataplane", "", "kube, kind: with the images make images builds, emulated (empty too: the emulated ztunnel and east-west gateway run as Istio's) or none (istiod only; the data-plane suites skip)")
	fs.StringVar(&f.platform, "istio.platform", "", "kube: Istio's platform settings for every cluster ("+strings.Join(install.Platforms(), ", ")+"); empty: what each cluster shows (GKE from its version, as istioctl does; OpenShift, k3s, k3d, MicroK8s from their API groups, version and nodes)")
	fs.BoolVar(&f.reuseIstio, "kube.reuse-istio", false, "kube: install over an istiod already in istio-system instead of refusing; objects that existed are left (as modified) at teardown")
}

// validate refuses missing images and an -istio.platform Istio does not know, naming the flag.
func (f *flagValues) validate() error {
	if err := install.CheckImageFlags(Name, f.images); err != nil {
		return err
	}
	return install.CheckPlatform(f.platform)
}
