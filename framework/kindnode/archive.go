package kindnode

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
)

// LoadArchive imports the image archive at path into node n, as `kind load image-archive` does
// (containerd's ctr import, with --all-platforms).
func LoadArchive(n nodes.Node, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return nodeutils.LoadImageArchive(n, f)
}

// ArchiveTags are the image names a docker archive holds (its manifest.json's RepoTags).
func ArchiveTags(path string) ([]string, error) {
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
