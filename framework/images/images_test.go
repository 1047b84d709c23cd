package images

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/bins"
)

func TestIstioTag(t *testing.T) {
	require.Equal(t, "eed52ebb66ad", IstioTag("v0.0.0-20260827124520-eed52ebb66ad"))
	require.Equal(t, "1.31.0", IstioTag("v1.31.0"))
}

// kind's own node files, from the pinned module, take every patch exactly once; a kind whose text
// moved fails here instead of building a node without its egress guard.
func TestKindFilesTakeThePatches(t *testing.T) {
	c, err := bins.Default()
	require.NoError(t, err)
	kind, err := c.ModuleSource(context.Background(), "sigs.k8s.io/kind")
	require.NoError(t, err)
	for rel, want := range map[string]string{
		"usr/local/bin/entrypoint":   "/usr/local/bin/ambientmc-node-guard\n\n# validate state",
		"etc/containerd/config.toml": "restrict_oom_score_adj = true",
	} {
		data, err := os.ReadFile(filepath.Join(kind, kindBase, rel))
		require.NoError(t, err)
		out, err := patchKindFile(rel, data)
		require.NoError(t, err, rel)
		require.Contains(t, string(out), want, rel)
	}
	entry, _ := os.ReadFile(filepath.Join(kind, kindBase, "usr/local/bin/entrypoint"))
	out, _ := patchKindFile("usr/local/bin/entrypoint", entry)
	require.NotContains(t, string(out), "getent ahostsv4 'host.docker.internal'", "no lookup leaves the node")
	_, err = patchKindFile("usr/local/bin/entrypoint", []byte("#!/bin/bash\n"))
	require.ErrorContains(t, err, "expected text not found once")
}

// The guard and the build script are valid bash, and the guard ends every chain in a REJECT.
func TestNodeScripts(t *testing.T) {
	for _, f := range []string{"files/node-guard.sh", "files/build-node.sh"} {
		data, err := files.ReadFile(f)
		require.NoError(t, err)
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(string(data))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", f, out)
	}
	guard, _ := files.ReadFile("files/node-guard.sh")
	require.Contains(t, string(guard), `iptables -w -A "${chain}" -j REJECT`)
	require.Contains(t, string(guard), `ip6tables -w -A "${chain6}" -j REJECT`)
}

func TestHostAptSource(t *testing.T) {
	if _, err := os.Stat("/etc/os-release"); err != nil {
		t.Skip("no /etc/os-release")
	}
	s, err := hostAptSource()
	if err != nil {
		t.Skipf("not a Debian host: %v", err)
	}
	require.NotEmpty(t, s.Mirror)
	require.NotEmpty(t, s.Suite)
}

// An image's binaries each get their directories once, in order, before the file.
func TestFilesLayer(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("A"), 0o755))
	require.NoError(t, os.WriteFile(b, []byte("BB"), 0o755))
	l, err := filesLayer(component{files: []file{{a, "/opt/cni/bin/istio-cni"}, {b, "/opt/cni/install"}}})
	require.NoError(t, err)
	var names []string
	for _, h := range layerHeaders(t, l) {
		names = append(names, h.Name)
	}
	require.Equal(t, []string{"opt/", "opt/cni/", "opt/cni/bin/", "opt/cni/bin/istio-cni", "opt/cni/install"}, names)
}

// The emulated data plane's archive holds its two images over no base, in one layer they share:
// the binary once, its second name a hard link, and the directories the charts mount.
func TestDataPlaneArchiveSharesOneLayer(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "emulated-dataplane")
	require.NoError(t, os.WriteFile(bin, []byte("emulator"), 0o755))
	s := Set{IstioHub: IstioHub, IstioTag: "eed52ebb66ad"}
	out := filepath.Join(dir, "dataplane.tar")
	require.NoError(t, writeArchive(out, "", dataPlaneComponents(s, bin)))

	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(out) })
	require.NoError(t, err)
	require.Len(t, m, 2)
	var tags []string
	for _, d := range m {
		tags = append(tags, d.RepoTags...)
		require.Len(t, d.Layers, 1, "no base layer")
		assert.Equal(t, m[0].Layers[0], d.Layers[0], "the images share their layer")
	}
	assert.ElementsMatch(t, []string{IstioHub + "/ztunnel:eed52ebb66ad", IstioHub + "/proxyv2:eed52ebb66ad"}, tags)

	zt, err := name.NewTag(IstioHub + "/ztunnel:eed52ebb66ad")
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(out, &zt)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	entries := map[string]*tar.Header{}
	for _, h := range layerHeaders(t, layers[0]) {
		entries[h.Name] = h
	}
	require.Contains(t, entries, "usr/local/bin/ztunnel")
	assert.EqualValues(t, len("emulator"), entries["usr/local/bin/ztunnel"].Size)
	require.Contains(t, entries, "usr/local/bin/pilot-agent")
	assert.Equal(t, byte(tar.TypeLink), entries["usr/local/bin/pilot-agent"].Typeflag)
	assert.Equal(t, "usr/local/bin/ztunnel", entries["usr/local/bin/pilot-agent"].Linkname)
	assert.EqualValues(t, 0o755, entries["usr/local/bin/pilot-agent"].Mode, "containerd gives the shared inode the link's mode")
	require.Contains(t, entries, "tmp/")
	assert.EqualValues(t, 0o1777, entries["tmp/"].Mode)
	for _, d := range []string{"etc/", "var/run/ztunnel/", "var/lib/istio/data/"} {
		assert.Contains(t, entries, d)
	}
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{"/usr/local/bin/ztunnel"}, cfg.Config.Entrypoint)
}

// layerHeaders are the tar headers of l's entries, in order.
func layerHeaders(t *testing.T, l v1.Layer) []*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	var out []*tar.Header
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, h)
	}
}
