package kind

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

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

// archiveTags are the image names a docker archive holds (its manifest.json's RepoTags).
func archiveTags(path string) ([]string, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		return nil, fmt.Errorf("reading the archive's manifest.json: %w (write one with docker image save)", err)
	}
	var out []string
	for _, d := range m {
		for _, t := range d.RepoTags {
			out = append(out, normalizeRef(t))
		}
	}
	return out, nil
}

// normalizeRef spells a Docker Hub name in full, as the node's containerd stores it.
func normalizeRef(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	if !found || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !found {
			ref = "library/" + ref
		}
		return "docker.io/" + ref
	}
	return ref
}
