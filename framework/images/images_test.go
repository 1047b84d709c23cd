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
	l, err := filesLayer([]file{{a, "/opt/cni/bin/istio-cni"}, {b, "/opt/cni/install"}})
	require.NoError(t, err)
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
	}
	require.Equal(t, []string{"opt/", "opt/cni/", "opt/cni/bin/", "opt/cni/bin/istio-cni", "opt/cni/install"}, names)
}
