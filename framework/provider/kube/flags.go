// Package kube is the provider for existing clusters: a topology whose clusters carry kubeconfig
// paths (ambientmc's format or Istio's prow JSON). Everything above the clusters is
// framework/incluster's; this package registers it with its flags.
package kube

import (
	"flag"
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/incluster"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/provider"
)

// flagValues are the kube provider's own flags; the Istio image flags are incluster's.
type flagValues struct {
	platform   string // -istio.platform
	reuseIstio bool   // -kube.reuse-istio
}

// Name is the provider's -provider value.
const Name = "kube"

var flags flagValues

func init() {
	provider.Register(provider.Spec{
		Name:         Name,
		Summary:      "existing clusters named by -topology",
		Capabilities: incluster.Capabilities(Name),
		Flags:        flags.register,
		Reads:        incluster.ImageFlagNames,
		Check:        flags.validate,
		New:          newFromFlags,
	})
}

// newFromFlags builds the provider from the flags: the images they name, else the ones make images
// built (read only then, so existing clusters with real images need no image build here).
func newFromFlags(e provider.Env) (cluster.Provider, error) {
	im := incluster.ImageFlags()
	if im.Hub == "" && im.Tag == "" {
		built, err := images.Default()
		if err != nil {
			return nil, fmt.Errorf("-provider=%s: the images make images builds: %w", Name, err)
		}
		im = install.OrBuilt(im, built)
	}
	p, err := incluster.New(incluster.Options{Name: Name, RunDir: e.RunDir, Log: e.Log, Images: im, ReuseIstio: flags.reuseIstio, Platform: flags.platform})
	if err != nil {
		return nil, err // not a nil *Provider in a non-nil interface
	}
	return p.Offered(), nil
}

func (f *flagValues) register(fs *flag.FlagSet) {
	fs.StringVar(&f.platform, "istio.platform", "", "kube: Istio's platform settings for every cluster ("+strings.Join(install.Platforms(), ", ")+"); empty: what each cluster shows (GKE from its version, as istioctl does; OpenShift, k3s, k3d, MicroK8s from their API groups, version and nodes)")
	fs.BoolVar(&f.reuseIstio, "kube.reuse-istio", false, "kube: install over an istiod already in istio-system instead of refusing; objects that existed are left (as modified) at teardown")
}

// validate refuses missing images and an -istio.platform Istio does not know, naming the flag.
func (f *flagValues) validate() error {
	if err := install.CheckImageFlags(Name, incluster.ImageFlags()); err != nil {
		return err
	}
	return install.CheckPlatform(f.platform)
}
