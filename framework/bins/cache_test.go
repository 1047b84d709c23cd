package bins

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinySource lays out a source root with two small main packages of one module standing in for
// pinned binaries.
func tinySource(t *testing.T) *Cache {
	root := t.TempDir()
	mod := filepath.Join(root, "scripts", "kubebin")
	for _, name := range []string{"hello", "bye"} {
		require.NoError(t, os.MkdirAll(filepath.Join(mod, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(mod, name, "main.go"), []byte("package main\n\nfunc main() { println(\""+name+"\") }\n"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/hello\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), nil, 0o644))
	return &Cache{
		Dir: filepath.Join(t.TempDir(), "cache"), SrcRoot: root, Log: io.Discard,
		recipes: map[Binary]recipe{
			"hello": {moduleDir: "scripts/kubebin", pkg: "./hello", coldBuild: time.Second},
			"bye":   {moduleDir: "scripts/kubebin", pkg: "./bye", coldBuild: time.Second},
		},
	}
}

// noBuildDirLeft asserts that no build's temporary directory is left in the cache.
func noBuildDirLeft(t *testing.T, c *Cache) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(c.Dir, ".build-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary build directory left")
}

// Binaries of one module build in one go command and land each in its own cache entry.
func TestEnsureBuildsAModulesBinariesTogether(t *testing.T) {
	c := tinySource(t)
	var log strings.Builder
	c.Log = &log
	paths, err := c.Ensure(context.Background(), "hello", "bye")
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(log.String(), "ambientmc: building "), log.String())
	assert.Contains(t, log.String(), "building hello and bye from ./hello, ./bye")
	for _, b := range []Binary{"hello", "bye"} {
		out, err := exec.Command(paths[b]).CombinedOutput()
		require.NoError(t, err)
		assert.Equal(t, string(b)+"\n", string(out), "%s is its own program", b)
		assert.Equal(t, string(b), filepath.Base(paths[b]))
	}
	assert.NotEqual(t, filepath.Dir(paths["hello"]), filepath.Dir(paths["bye"]))
	noBuildDirLeft(t, c)
}

func TestEnsureBuildsOnceAndCaches(t *testing.T) {
	c := tinySource(t)
	missing, err := c.Missing("hello")
	require.NoError(t, err)
	assert.Equal(t, []Binary{"hello"}, missing)

	// Two builders at once: the lock makes the second reuse the first one's result.
	var wg sync.WaitGroup
	paths := make([]string, 2)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Ensure(context.Background(), "hello")
			assert.NoError(t, err)
			paths[i] = got["hello"]
		}()
	}
	wg.Wait()
	require.Equal(t, paths[0], paths[1])
	info, err := os.Stat(paths[0])
	require.NoError(t, err)
	assert.NotZero(t, info.Mode()&0o100, "built binary is executable")

	missing, err = c.Missing("hello")
	require.NoError(t, err)
	assert.Empty(t, missing)
	noBuildDirLeft(t, c)
}

func TestKeyFollowsPinnedSources(t *testing.T) {
	c := tinySource(t)
	before, err := c.Path("hello")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(c.SrcRoot, "scripts", "kubebin", "go.sum"), []byte("example.org/x v1.0.0 h1:abc=\n"), 0o644))
	after, err := c.Path("hello")
	require.NoError(t, err)
	assert.NotEqual(t, before, after, "a change to go.sum must select another cache entry")
}

func TestBuildFailureShowsCompilerOutput(t *testing.T) {
	c := tinySource(t)
	require.NoError(t, os.WriteFile(filepath.Join(c.SrcRoot, "scripts", "kubebin", "hello", "main.go"), []byte("package main\n\nfunc main() { undefinedThing() }\n"), 0o644))
	_, err := c.Ensure(context.Background(), "hello")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "undefinedThing")
	assert.Contains(t, err.Error(), "building hello")
	noBuildDirLeft(t, c)
}

func TestUnknownBinary(t *testing.T) {
	c := tinySource(t)
	_, err := c.Path("nope")
	assert.ErrorContains(t, err, `unknown binary "nope"`)
}

func TestSourceRootIsThisCheckout(t *testing.T) {
	root, err := SourceRoot()
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	assert.NoError(t, err)
}

func TestKubeAPIServerVersionIsStamped(t *testing.T) {
	root, err := SourceRoot()
	require.NoError(t, err)
	c := &Cache{SrcRoot: root}
	flags, err := c.ldflags(context.Background(), recipes[KubeAPIServer])
	require.NoError(t, err)
	assert.Regexp(t, `-X k8s.io/component-base/version.gitVersion=v1\.\d+\.\d+ `, flags)
	assert.Contains(t, flags, "version.gitMajor=1 ")
	empty, err := c.ldflags(context.Background(), recipes[Etcd])
	require.NoError(t, err)
	assert.Empty(t, empty)
}

// Istio's binaries of the node images (install-cni, istio-cni) build in the pinned istiod's wrapper
// module, with exactly pilot-discovery's pins; the rest of the node's in their own modules.
func TestNodeRecipesResolveTheirModule(t *testing.T) {
	c, err := Default()
	require.NoError(t, err)
	pinned, err := c.PinnedIstio()
	require.NoError(t, err)
	wrapper := filepath.Join(IstiodWrappers, pinned)
	for _, b := range []Binary{PilotDiscovery, InstallCNI, IstioCNI} {
		r, err := c.recipe(b)
		require.NoError(t, err, b)
		assert.Equal(t, wrapper, r.moduleDir, b)
	}
	r, err := c.recipe(Fortio)
	require.NoError(t, err)
	assert.Equal(t, "scripts/nodebin/fortio", r.moduleDir)
	for _, b := range NodeBinaries {
		_, err := c.Path(b)
		require.NoError(t, err, b)
	}
}
