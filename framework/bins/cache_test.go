package bins

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinySource lays out a source root with one small main package standing in for a pinned binary.
func tinySource(t *testing.T) *Cache {
	root := t.TempDir()
	mod := filepath.Join(root, "scripts", "kubebin")
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "hello"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/hello\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "hello", "main.go"), []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644))
	return &Cache{
		Dir: filepath.Join(t.TempDir(), "cache"), SrcRoot: root, Log: io.Discard,
		recipes: map[Binary]recipe{"hello": {moduleDir: "scripts/kubebin", pkg: "./hello", coldBuild: time.Second}},
	}
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
	_, err = os.Stat(paths[0] + ".tmp")
	assert.True(t, os.IsNotExist(err), "no temporary file left")
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
