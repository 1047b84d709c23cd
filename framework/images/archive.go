package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// component is one image: binaries over the shared base tree (or over nothing, where the archive
// has no base).
type component struct {
	refs       []string // every name the image is known by
	files      []file
	entrypoint []string
	user       string // the image's USER, "" for root
	workdir    string
	// links are further names of the first file (hard links in the same layer: stored once).
	links []string
	// dirs are empty directories the image holds, with their modes.
	dirs []dir
}

// file is a binary of the cache and where it goes in an image.
type file struct{ binary, path string }

// dir is an empty directory of an image.
type dir struct {
	path string
	mode int64
}

// imagePath is the PATH of every component image (Istio's install-cni adds /opt/cni/bin, as its
// Dockerfile does).
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/cni/bin"

// writeArchive writes every component as one single-platform docker archive (what containerd's
// `ctr images import` reads); the base layer is stored once. With no baseTar the images hold only
// their own layer.
func writeArchive(out, baseTar string, comps []component) error {
	var base []v1.Layer
	if baseTar != "" {
		l, err := tarball.LayerFromFile(baseTar, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return fmt.Errorf("base layer: %w", err)
		}
		base = append(base, l)
	}
	refs := map[name.Reference]v1.Image{}
	for _, c := range comps {
		bin, err := filesLayer(c)
		if err != nil {
			return err
		}
		img, err := mutate.AppendLayers(empty.Image, append(base, bin)...)
		if err != nil {
			return err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cfg = cfg.DeepCopy()
		cfg.OS, cfg.Architecture = "linux", "amd64"
		cfg.Config.Env = []string{imagePath}
		cfg.Config.Entrypoint = c.entrypoint
		cfg.Config.User = c.user
		cfg.Config.WorkingDir = c.workdir
		if img, err = mutate.ConfigFile(img, cfg); err != nil {
			return err
		}
		for _, r := range c.refs {
			tag, err := name.NewTag(r)
			if err != nil {
				return fmt.Errorf("image name %s: %w", r, err)
			}
			refs[tag] = img
		}
	}
	tmp := out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// filesLayer is a layer holding a component's executable files and their links, each with the
// directories above it, and its empty directories.
func filesLayer(c component) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	written := map[string]bool{}
	// parents writes the directories above p not written yet, 0755.
	parents := func(p string) error {
		var todo []string
		for d := path.Dir(p); d != "." && !written[d]; d = path.Dir(d) {
			todo = append([]string{d}, todo...)
			written[d] = true
		}
		for _, d := range todo {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		return nil
	}
	rel := func(p string) string { return path.Clean("/" + p)[1:] }
	for _, d := range c.dirs {
		p := rel(d.path)
		if err := parents(p); err != nil {
			return nil, err
		}
		written[p] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: d.mode, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	for _, f := range c.files {
		data, err := os.ReadFile(f.binary)
		if err != nil {
			return nil, err
		}
		dst := rel(f.path)
		if err := parents(dst); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	for _, l := range c.links {
		if len(c.files) == 0 {
			return nil, fmt.Errorf("image %v: links %v but no file to link to", c.refs, c.links)
		}
		dst := rel(l)
		if err := parents(dst); err != nil {
			return nil, err
		}
		// A link carries its target's mode: containerd applies a link header's mode to the inode
		// the two names share.
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: dst, Linkname: rel(c.files[0].path), Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerData := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerData)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
}
