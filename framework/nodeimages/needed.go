// Package nodeimages is what images a kind run's nodes need and where each comes from: the images
// a run starts (Needed), those only Docker's image store holds saved once into one archive for
// every node (Store), as kind load docker-image does, and the archives imported into a node.
package nodeimages

import (
	"context"
	"fmt"

	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/metallb"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Needed are the images a run of Istio images im starts in every cluster: MetalLB's, as its manifest names
// them, the Istio images the install renders (istiod alone without a data plane; ztunnel and proxyv2 hold
// the emulated data plane in the images make images builds) and, with a data
// plane, the probes' fortio.
func Needed(ctx context.Context, im install.Images) ([]string, error) {
	manifest, err := metallb.Manifest(ctx)
	if err != nil {
		return nil, err
	}
	out, err := images.ManifestImages(manifest)
	if err != nil {
		return nil, err
	}
	tag := im.Tag
	if im.Variant != "" {
		tag += "-" + im.Variant
	}
	istio := []string{"pilot"}
	if im.RunsDataPlane() != report.DataPlaneNone {
		istio = append(istio, "install-cni", "ztunnel", "proxyv2")
	}
	for _, n := range istio {
		out = append(out, fmt.Sprintf("%s/%s:%s", im.Hub, n, tag))
	}
	if im.RunsDataPlane() != report.DataPlaneNone {
		out = append(out, install.DefaultProbeImage) // the probe pods
	}
	return out, nil
}
