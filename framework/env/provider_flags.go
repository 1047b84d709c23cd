package env

import (
	"flag"
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/mesh/install"
)

// ProviderFlags are the flags of the providers that install Istio into real clusters (kind, kube).
type ProviderFlags struct {
	IstioHub, IstioTag, IstioVariant string
	// IstioPlatform is one of Istio's platform names (kube); "" lets the kube provider detect it.
	IstioPlatform string
	// KubeReuseIstio lets the kube provider install over an istiod already there.
	KubeReuseIstio bool
}

func registerProvider(fs *flag.FlagSet, f *ProviderFlags) {
	fs.StringVar(&f.IstioHub, "istio.hub", "", "image hub of istiod, ztunnel, istio-cni and the gateway (kind, kube; required there), e.g. registry.istio.io/testing")
	fs.StringVar(&f.IstioTag, "istio.tag", "", "image tag (kind, kube; required there), e.g. 1.31-dev or a full commit SHA")
	fs.StringVar(&f.IstioVariant, "istio.variant", "", "image variant (kind, kube): empty for the plain tag, or e.g. distroless")
	fs.StringVar(&f.IstioPlatform, "istio.platform", "", "kube: Istio's platform settings for every cluster ("+strings.Join(install.Platforms(), ", ")+"); empty: what each cluster shows (GKE from its version, as istioctl does; OpenShift, k3s, k3d, MicroK8s from their API groups, version and nodes)")
	fs.BoolVar(&f.KubeReuseIstio, "kube.reuse-istio", false, "kube: install over an istiod already in istio-system instead of refusing; objects that existed are left (as modified) at teardown")
}

// validateFor refuses provider flag values that cannot work with provider, naming the flag.
func (f *ProviderFlags) validateFor(provider string) error {
	if f.IstioPlatform == "" {
		return nil
	}
	if err := install.CheckPlatform(f.IstioPlatform); err != nil {
		return err
	}
	if provider != "kube" {
		return fmt.Errorf("-istio.platform=%s: only -provider=kube installs onto other platforms; -provider=%s clusters need no platform settings, so drop the flag", f.IstioPlatform, provider)
	}
	return nil
}
