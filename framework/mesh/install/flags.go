package install

import (
	"flag"
	"fmt"
	"strings"
	"sync"
)

// imageFlags holds the -istio.hub, -istio.tag and -istio.variant values.
var imageFlags struct {
	once   sync.Once
	images Images
}

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

// RequireImages refuses images without a hub or a tag for provider: there is no default.
func RequireImages(provider string, im Images) error {
	var missing []string
	if im.Hub == "" {
		missing = append(missing, "-istio.hub (e.g. -istio.hub=registry.istio.io/testing)")
	}
	if im.Tag == "" {
		missing = append(missing, "-istio.tag (e.g. -istio.tag=1.31-dev or a full commit SHA)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("-provider=%s installs Istio from images and has no default for them: pass %s", provider, strings.Join(missing, " and "))
	}
	return nil
}
