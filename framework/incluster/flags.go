package incluster

import (
	"flag"

	"github.com/ambientmc/ambientmc/framework/mesh/install"
)

// The Istio image flags are every provider's that installs Istio through this package (kube,
// kind): each lists ImageFlagNames in its provider.Spec.Reads, so a run of any other provider
// refuses them.
var imageFlags install.Images

// ImageFlagNames are the Istio image flags registered here.
var ImageFlagNames = []string{"istio.hub", "istio.tag", "istio.variant", "istio.dataplane", "istio.build"}

func init() {
	flag.StringVar(&imageFlags.Hub, "istio.hub", "", "kube, kind: image hub of istiod, ztunnel, istio-cni and the gateway (with -istio.tag; neither: the images make images builds), e.g. registry.istio.io/testing")
	flag.StringVar(&imageFlags.Tag, "istio.tag", "", "kube, kind: image tag (with -istio.hub), e.g. 1.31-dev or a full commit SHA")
	flag.StringVar(&imageFlags.Variant, "istio.variant", "", "kube, kind: image variant: empty for the plain tag, or e.g. distroless")
	flag.StringVar(&imageFlags.Build, "istio.build", "", "kube, kind: the istio.io/istio module version -istio.hub's images were built from (e.g. v0.0.0-20260827124520-eed52ebb66ad): it names the istiod under test in the report and the checks' known-issue table, and lets the checks run a second istiod of that build on this host; empty: unknown")
	flag.StringVar(&imageFlags.DataPlane, "istio.dataplane", "", "kube, kind: with the images make images builds, emulated (empty too: the emulated ztunnel and east-west gateway run as Istio's) or none (istiod only; the data-plane suites skip)")
}

// ImageFlags are the images -istio.hub, -istio.tag, -istio.variant, -istio.build and -istio.dataplane name.
func ImageFlags() install.Images { return imageFlags }
