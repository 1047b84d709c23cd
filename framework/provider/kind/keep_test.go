package kind

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/kindconfig"
)

// hostFile writes a file under the fixture's stand-in for /.
func hostFile(t *testing.T, root, name, value string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(value+"\n"), 0o644))
}

// -keep: Destroy leaves the clusters and their network; their kubeconfigs (0600) and the record of
// what the run made and changed are in a kept directory outside the run directory, and one printed
// command removes it all.
func TestKeepLeavesClustersWithWhatTheirRemovalNeedsFakeDocker(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("AMBIENTMC_CACHE", cache)
	root := t.TempDir()
	hostFile(t, root, "proc/sys/kernel/panic", "1")
	f := newFixture(t, func(o *Options) { o.Keep, o.HostRoot = true, root })
	_, err := f.p.Create(context.Background(), generate(t, 2))
	require.NoError(t, err)
	hostFile(t, root, "proc/sys/kernel/panic", "10") // what the nodes' kubelets do
	require.NoError(t, f.p.Destroy(context.Background()))
	assert.Empty(t, f.kind.deletes)
	assert.Equal(t, 2, f.kind.alive())
	assert.Empty(t, f.docker.removed, "the network stays with its clusters")

	dir := filepath.Join(cache, "kept", f.p.netName)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		kc := filepath.Join(dir, c, "kubeconfig")
		st, err := os.Stat(kc)
		require.NoError(t, err, "the kubeconfig outlives the run directory")
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
		want, err := os.ReadFile(f.p.KubeconfigPath(c))
		require.NoError(t, err)
		got, err := os.ReadFile(kc)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	}
	var st keptState
	data, err := os.ReadFile(filepath.Join(dir, keptStateFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &st))
	assert.ElementsMatch(t, []string{"ambientmc-cluster-1", "ambientmc-cluster-2"}, st.Clusters)
	assert.Equal(t, f.p.netName, st.Network)
	assert.Equal(t, "1", st.Kernel.Sysctls["kernel/panic"], "the host before the first node started")
	assert.Contains(t, f.log.String(), "-keep: left 2 clusters and the docker network "+f.p.netName)
	assert.Contains(t, f.log.String(), "run ./scripts/kept -remove "+dir+"\n")
	require.NoError(t, f.p.Destroy(context.Background()))
	assert.Equal(t, 1, strings.Count(f.log.String(), "-keep: left"), "said once")

	// The removal: clusters and network gone, the host put back, the kept directory removed.
	f.kind.deletes = nil
	require.NoError(t, removeKept(context.Background(), dir, Options{Log: f.log, Kind: f.kind, Docker: f.docker}, root))
	assert.ElementsMatch(t, []string{"ambientmc-cluster-1", "ambientmc-cluster-2"}, f.kind.deletes)
	for i, kc := range f.kind.deleteKubeconfigs {
		assert.Equal(t, filepath.Join(dir, f.kind.deletes[i][len(kindconfig.NamePrefix):], "kubeconfig"), kc, "kind's delete edits the kept kubeconfig, never ~/.kube/config")
	}
	assert.Equal(t, 0, f.kind.alive())
	assert.Equal(t, []string{f.p.netName}, f.docker.removed)
	panic, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/panic"))
	require.NoError(t, err)
	assert.Equal(t, "1\n", string(panic))
	assert.Contains(t, f.log.String(), "put the host back as it was: kernel.panic 10 -> 1")
	assert.NoDirExists(t, dir)
	assert.Contains(t, f.log.String(), "removed the kept run "+dir+": clusters ambientmc-cluster-")
	assert.NotContains(t, f.log.String(), "clusters , ")
	assert.ErrorContains(t, removeKept(context.Background(), dir, Options{Log: f.log, Kind: f.kind, Docker: f.docker}, root), "is not a kept run's directory")
}

// The framework asks Keep itself and says what was kept: Destroy then prints nothing more.
func TestKeepForTheFrameworkFakeDocker(t *testing.T) {
	t.Setenv("AMBIENTMC_CACHE", t.TempDir())
	f := newFixture(t, func(o *Options) { o.Keep = true })
	kept, err := f.p.Keep()
	require.NoError(t, err)
	assert.Empty(t, kept.Dir, "nothing made, nothing kept")
	_, err = f.p.Create(context.Background(), generate(t, 2))
	require.NoError(t, err)
	kept, err = f.p.Keep()
	require.NoError(t, err)
	require.Len(t, kept.Clusters, 2)
	assert.FileExists(t, kept.Clusters[0].Kubeconfig)
	assert.Contains(t, kept.Remove, "run ./scripts/kept -remove "+kept.Dir)
	require.NoError(t, f.p.Destroy(context.Background()))
	assert.NotContains(t, f.log.String(), "-keep: left")
}

// A later run that finds a kept cluster names the kept run's removal.
func TestPreflightNamesTheKeptRunsRemovalFakeDocker(t *testing.T) {
	t.Setenv("AMBIENTMC_CACHE", t.TempDir())
	kept := newFixture(t, func(o *Options) { o.Keep = true })
	_, err := kept.p.Create(context.Background(), generate(t, 1))
	require.NoError(t, err)
	k, err := kept.p.Keep()
	require.NoError(t, err)

	f := newFixture(t, nil)
	f.kind.existing = []string{"ambientmc-cluster-1"}
	err = f.p.Preflight(context.Background(), generate(t, 1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ambientmc-cluster-1 already exists, kept by an earlier run with -keep; remove that run's clusters and network and put the host back with: "+k.Remove)
}
