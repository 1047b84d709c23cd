package dockerhost

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A freezer hierarchy as cgroupfs shows it, in a directory: only the frozen cgroups of the given
// containers are thawed, under either cgroup driver.
func TestThawFrozenThawsOnlyTheNodesFrozenCgroups(t *testing.T) {
	root := t.TempDir()
	state := func(rel, s string) string {
		dir := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(s+"\n"), 0o644))
		return dir
	}
	frozenPod := state("docker/node1/kubelet.slice/kubepods.slice/pod1/cri-containerd-a.scope", "FROZEN")
	freezing := state("system.slice/docker-node2.scope/kubelet.slice/pod2", "FREEZING")
	runningPod := state("docker/node1/kubelet.slice/kubepods.slice/pod3", "THAWED")
	otherNode := state("docker/node9/kubelet.slice/pod4", "FROZEN")

	thawed, err := ThawFrozen(root, []string{"node1", "node2", "gone"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{frozenPod, freezing}, thawed)
	read := func(dir string) string {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "THAWED", read(frozenPod))
	assert.Equal(t, "THAWED", read(freezing))
	assert.Equal(t, "THAWED\n", read(runningPod), "not frozen: left alone")
	assert.Equal(t, "FROZEN\n", read(otherNode), "another container's cgroup: left alone")

	thawed, err = ThawFrozen(filepath.Join(root, "nothing-here"), []string{"node1"})
	require.NoError(t, err, "a host without cgroup v1's freezer")
	assert.Empty(t, thawed)
}
