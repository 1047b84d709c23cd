package install

import (
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/report"
)

// OrBuilt returns im, or when it names no hub and no tag, the Istio images `make images` built
// (framework/images), which no registry serves: kubelet is told never to pull them.
func OrBuilt(im Images, built images.Set) Images {
	if im.Hub != "" || im.Tag != "" {
		return im
	}
	return Images{Hub: built.IstioHub, Tag: built.IstioTag, PullPolicy: "Never", Build: built.Istio, DataPlane: im.DataPlane}
}

// RunsDataPlane is what these images run: "emulated" for the ones `make images` builds (ztunnel
// and the gateway's Envoy cannot be built here: their images hold this project's emulated data
// plane, emulator/cmd/emulated-dataplane) unless -istio.dataplane=none, else "ztunnel".
func (im Images) RunsDataPlane() string {
	if im.Hub == images.IstioHub {
		if im.DataPlane == report.DataPlaneNone {
			return report.DataPlaneNone
		}
		return report.DataPlaneEmulated
	}
	return report.DataPlaneZtunnel
}

// CheckImageFlags refuses -istio.hub without -istio.tag or the reverse; neither means the images
// make images builds (OrBuilt).
func CheckImageFlags(provider string, im Images) error {
	switch im.DataPlane {
	case "", report.DataPlaneEmulated, report.DataPlaneNone:
	default:
		return fmt.Errorf("-istio.dataplane=%s: want emulated (the default) or none", im.DataPlane)
	}
	if im.Hub == "" && im.Tag == "" {
		if im.Build != "" {
			return fmt.Errorf("-istio.build=%s names the build of -istio.hub's images: pass -istio.hub and -istio.tag too, or drop it (the images make images builds know their build)", im.Build)
		}
		return nil
	}
	if im.DataPlane != "" {
		return fmt.Errorf("-istio.dataplane=%s chooses among the images make images builds: with -istio.hub and -istio.tag the images' own ztunnel and gateway run; drop one or the other", im.DataPlane)
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
