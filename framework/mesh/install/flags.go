package install

import (
	"flag"
	"fmt"
	"strings"
	"sync"

	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/report"
)

// imageFlags holds the -istio.hub, -istio.tag and -istio.variant values.
var imageFlags struct {
	once   sync.Once
	images Images
}

// ImageFlagNames are the flags ImageFlags registers, for the providers that read them
// (provider.Spec.Reads).
var ImageFlagNames = []string{"istio.hub", "istio.tag", "istio.variant"}

// ImageFlags returns the Istio images -istio.hub, -istio.tag and -istio.variant name. The
// providers that install Istio from images share the flags: the first call registers them on the
// default flag set.
func ImageFlags() *Images {
	imageFlags.once.Do(func() {
		im := &imageFlags.images
		flag.StringVar(&im.Hub, "istio.hub", "", "image hub of istiod, ztunnel, istio-cni and the gateway, for providers that install Istio from images (required there), e.g. registry.istio.io/testing")
		flag.StringVar(&im.Tag, "istio.tag", "", "image tag, for providers that install Istio from images (required there), e.g. 1.31-dev or a full commit SHA")
		flag.StringVar(&im.Variant, "istio.variant", "", "image variant: empty for the plain tag, or e.g. distroless")
	})
	return &imageFlags.images
}

// OrBuilt returns im, or when it names no hub and no tag, the Istio images `make images` built
// (framework/images), which no registry serves: kubelet is told never to pull them.
func OrBuilt(im Images, built images.Set) Images {
	if im.Hub != "" || im.Tag != "" {
		return im
	}
	return Images{Hub: built.IstioHub, Tag: built.IstioTag, PullPolicy: "Never", Build: built.Istio}
}

// DataPlane is what these images run: "none" for the ones `make images` builds (istiod only:
// ztunnel and the gateway's Envoy cannot be built here), else "ztunnel".
func (im Images) DataPlane() string {
	if im.Hub == images.IstioHub {
		return report.DataPlaneNone
	}
	return report.DataPlaneZtunnel
}

// CheckImageFlags refuses -istio.hub without -istio.tag or the reverse; neither means the images
// make images builds (OrBuilt).
func CheckImageFlags(provider string, im Images) error {
	if im.Hub == "" && im.Tag == "" {
		return nil
	}
	return RequireImages(provider, im)
}

// RequireImages refuses images without a hub or a tag for provider (a hub alone, or a tag alone).
func RequireImages(provider string, im Images) error {
	var missing []string
	if im.Hub == "" {
		missing = append(missing, "-istio.hub (e.g. -istio.hub=registry.istio.io/testing)")
	}
	if im.Tag == "" {
		missing = append(missing, "-istio.tag (e.g. -istio.tag=1.31-dev or a full commit SHA)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("-provider=%s installs Istio from images: pass %s too, or neither for the images make images builds", provider, strings.Join(missing, " and "))
	}
	return nil
}
