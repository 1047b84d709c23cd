package kind

import (
	"context"
	"fmt"

	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/metallb"
	"github.com/ambientmc/ambientmc/framework/report"
)

// neededImages are the images a run starts in every cluster: MetalLB's, as its manifest names
// them, the Istio images the install renders (istiod alone without a data plane; ztunnel and proxyv2 hold
// the emulated data plane in the images make images builds) and, with a data
// plane, the probes' fortio.
func (p *Provider) neededImages(ctx context.Context) ([]string, error) {
	manifest, err := metallb.Manifest(ctx)
	if err != nil {
		return nil, err
	}
	out, err := images.ManifestImages(manifest)
	if err != nil {
		return nil, err
	}
	im := p.opts.Istio
	tag := im.Tag
	if im.Variant != "" {
		tag += "-" + im.Variant
	}
	istio := []string{"pilot"}
	if p.opts.Istio.RunsDataPlane() != report.DataPlaneNone {
		istio = append(istio, "install-cni", "ztunnel", "proxyv2")
	}
	for _, n := range istio {
		out = append(out, fmt.Sprintf("%s/%s:%s", im.Hub, n, tag))
	}
	if p.opts.Istio.RunsDataPlane() != report.DataPlaneNone {
		out = append(out, install.DefaultProbeImage) // the probe pods
	}
	return out, nil
}
