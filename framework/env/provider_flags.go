package env

import "flag"

// ProviderFlags are the flags of the providers that install Istio into real clusters (kind, kube).
type ProviderFlags struct {
	IstioHub, IstioTag, IstioVariant string
	// KubeReuseIstio lets the kube provider install over an istiod already there.
	KubeReuseIstio bool
}

func registerProvider(fs *flag.FlagSet, f *ProviderFlags) {
	fs.StringVar(&f.IstioHub, "istio.hub", "", "image hub of istiod, ztunnel, istio-cni and the gateway (kind, kube; required there), e.g. registry.istio.io/testing")
	fs.StringVar(&f.IstioTag, "istio.tag", "", "image tag (kind, kube; required there), e.g. 1.31-dev or a full commit SHA")
	fs.StringVar(&f.IstioVariant, "istio.variant", "", "image variant (kind, kube): empty for the plain tag, or e.g. distroless")
	fs.BoolVar(&f.KubeReuseIstio, "kube.reuse-istio", false, "kube: install over an istiod already in istio-system instead of refusing; objects that existed are left (as modified) at teardown")
}
