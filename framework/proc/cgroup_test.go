package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The working set as kubelet computes it, from files shaped as cgroup v1 and v2 write them.
func TestWorkingSetIsUsageMinusInactiveFile(t *testing.T) {
	for _, tc := range []struct {
		name        string
		v1          bool
		usage, stat string
		want        float64
	}{
		{"v1", true, "1000000\n", "cache 500\ntotal_inactive_file 300000\ninactive_file 1\n", 700000},
		{"v2", false, "1000000\n", "anon 600000\ninactive_file 250000\n", 750000},
		{"more inactive than usage", false, "100\n", "inactive_file 200\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			usageFile := "memory.current"
			if tc.v1 {
				usageFile = "memory.usage_in_bytes"
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, usageFile), []byte(tc.usage), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.stat"), []byte(tc.stat), 0o644))
			got, err := WorkingSetBytes(dir)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.current"), []byte("5\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.stat"), []byte("anon 5\n"), 0o644))
	_, err := WorkingSetBytes(dir)
	assert.ErrorContains(t, err, "no inactive_file", "a missing figure is an error, not 0")
}

// Where this host lets a root process make memory cgroups (the reference host does), a program
// started in one is charged there, and nothing is left behind.
func TestProgramStartedInAMemoryCgroup(t *testing.T) {
	cg, err := NewMemoryCgroup("ambientmc-test-" + filepath.Base(t.TempDir()))
	if err != nil {
		t.Skipf("no memory cgroup to make here: %v", err)
	}
	path, args := cg.Command("sleep", []string{"30"})
	p := exec.Command(path, args...)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Process.Kill(); _ = p.Wait() })
	require.Eventually(t, func() bool {
		procs, err := os.ReadFile(filepath.Join(cg.Dir, "cgroup.procs"))
		return err == nil && strings.TrimSpace(string(procs)) == strconv.Itoa(p.Process.Pid)
	}, 5*time.Second, 10*time.Millisecond, "the started process, and only it, is in the cgroup")
	require.Eventually(t, func() bool {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.Process.Pid))
		return strings.TrimSpace(string(cmd)) == "sleep"
	}, 5*time.Second, 10*time.Millisecond, "the shell became the program")
	ws, err := cg.WorkingSetBytes()
	require.NoError(t, err)
	assert.Positive(t, ws, "sleep's own pages")
	require.NoError(t, p.Process.Kill())
	_ = p.Wait()
	require.NoError(t, cg.Remove())
	_, err = os.Stat(cg.Dir)
	assert.True(t, os.IsNotExist(err), "nothing left behind")
}
