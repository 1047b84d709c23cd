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

// component is one image preloaded into the node: binaries over the shared base tree.
type component struct {
	refs       []string // every name the image is known by
	files      []file
	entrypoint []string
	user       string // the image's USER, "" for root
	workdir    string
}

// file is a binary of the cache and where it goes in an image.
type file struct{ binary, path string }

// imagePath is the PATH of every component image (Istio's install-cni adds /opt/cni/bin, as its
// Dockerfile does).
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/cni/bin"

// writeArchive writes every component as one single-platform docker archive (what containerd's
// `ctr images import` reads); the base layer is stored once.
func writeArchive(out, baseTar string, comps []component) error {
	base, err := tarball.LayerFromFile(baseTar, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return fmt.Errorf("base layer: %w", err)
	}
	refs := map[name.Reference]v1.Image{}
	for _, c := range comps {
		bin, err := filesLayer(c.files)
		if err != nil {
			return err
		}
		img, err := mutate.AppendLayers(empty.Image, base, bin)
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

// filesLayer is a layer holding executable files, each with the directories above it.
func filesLayer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f.binary)
		if err != nil {
			return nil, err
		}
		dst := path.Clean("/" + f.path)[1:]
		var parents []string
		for d := path.Dir(dst); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
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
