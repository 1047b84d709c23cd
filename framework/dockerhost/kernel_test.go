package dockerhost

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A directory stands in for / : kubelet's writes and Docker's /lib/modules are simulated there.
func TestKernelSettingsPutBack(t *testing.T) {
	root := t.TempDir()
	write := func(n, v string) {
		p := filepath.Join(root, "proc/sys", n)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(v+"\n"), 0o644))
	}
	read := func(n string) string {
		data, err := os.ReadFile(filepath.Join(root, "proc/sys", n))
		require.NoError(t, err)
		return string(data)
	}
	write("vm/overcommit_memory", "0")
	write("kernel/panic", "0")
	write("kernel/panic_on_oops", "0")
	k := RecordKernel(root)

	// What a kubelet in a node and Docker do to the host.
	write("vm/overcommit_memory", "1")
	write("kernel/panic", "10")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "lib/modules"), 0o755))

	changed, err := k.Restore()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"vm.overcommit_memory 1 -> 0", "kernel.panic 10 -> 0", "removed the empty /lib/modules Docker created"}, changed)
	require.Equal(t, "0\n", read("vm/overcommit_memory"))
	require.Equal(t, "0\n", read("kernel/panic"))
	require.Equal(t, "0\n", read("kernel/panic_on_oops"))
	require.NoDirExists(t, filepath.Join(root, "lib/modules"))
	changed, err = k.Restore()
	require.NoError(t, err)
	require.Empty(t, changed, "a second restore changes nothing")
}

// A /lib/modules that was there before the run stays, and one with content is never removed.
func TestKernelKeepsModulesItDidNotCreate(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "lib/modules"), 0o755))
	k := RecordKernel(root)
	_, err := k.Restore()
	require.NoError(t, err)
	require.DirExists(t, filepath.Join(root, "lib/modules"))
}
