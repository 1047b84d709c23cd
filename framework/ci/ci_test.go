package ci

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/env"
)

// withCI sets the CI flags for one test.
func withCI(t *testing.T, f Flags) {
	t.Helper()
	old := *ciFlags
	*ciFlags = f
	t.Cleanup(func() { *ciFlags = old })
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// Bad gates and baselines are one error naming the flag and the fix (env runs Check before
// anything starts).
func TestCheckRejectsBadGates(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeFile(t, dir, name, content) }
	unknown := write("unknown.yaml", "gates:\n  controlPlane.perRemoteCluster.liveHeap: {max: 5e6}\n")
	withBaseline := write("base.yaml", "gates:\n  churn.runs[*].lost: {max: 0}\nbaseline:\n  bounds:\n    Join/perRemote:live-heap-B: {maxIncrease: 10%}\n")
	noBaseline := write("plain.yaml", "gates:\n  churn.runs[*].lost: {max: 0}\n")
	runs := filepath.Join(dir, "runs")
	for i := range 3 {
		d := filepath.Join(runs, "a-"+string(rune('1'+i)))
		require.NoError(t, os.MkdirAll(d, 0o755))
		write(filepath.Join("runs", filepath.Base(d), "bench.txt"), "pkg: x\nBenchmarkJoin/clusters=3/perRemote 1 3e6 live-heap-B\n")
	}
	for _, tc := range []struct {
		name string
		ci   Flags
		want []string
	}{
		{"unknown path", Flags{Gates: unknown}, []string{"-gates=" + unknown, "line 2", `no key "liveHeap"`, "known keys: cpuCores"}},
		{"missing file", Flags{Gates: filepath.Join(dir, "nope.yaml")}, []string{"-gates=", "nope.yaml", "no such file"}},
		{"baseline without gates", Flags{Baseline: runs}, []string{"-baseline=" + runs, "needs -gates=FILE with a baseline: section"}},
		{"gates without baseline section", Flags{Gates: noBaseline, Baseline: runs}, []string{"has no baseline: section"}},
		{"missing baseline", Flags{Gates: withBaseline, Baseline: filepath.Join(dir, "gone")}, []string{"-baseline=", "gone", "no such file"}},
		{"baseline too small to judge", Flags{Gates: withBaseline, Baseline: runs}, []string{"the baseline has 3 values", "needs 39 baseline runs at alpha 0.05", "make compare ROUNDS=4 FAIL_ON="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withCI(t, tc.ci)
			err := New().Check(&env.Env{Log: io.Discard})
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// The logs a failed run leaves for CI: everything readable, no credential, no etcd database.
func TestCopyLogsLeavesCredentialsAndDataOut(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "logs")
	files := map[string]os.FileMode{
		"cluster-1/kube-apiserver.log": 0o644, "cluster-1/kubeconfig": 0o600, "cluster-1/sa.key": 0o600,
		"etcd/etcd.log": 0o644, "etcd/data/member/snap/db": 0o644, "istiod/cluster-1/istiod.log": 0o644,
		"istiod/cluster-1/mesh.yaml": 0o644, "istiod/cluster-1/cacerts/ca-key.pem": 0o600,
	}
	for name, mode := range files {
		p := filepath.Join(src, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(name), mode))
	}
	require.NoError(t, copyLogs(src, dst))
	for name, mode := range files {
		_, err := os.Stat(filepath.Join(dst, name))
		keep := mode == 0o644 && !strings.Contains(name, "/data/")
		assert.Equal(t, keep, err == nil, "%s copied: %v", name, err == nil)
	}
}
