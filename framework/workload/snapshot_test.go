package workload

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSnapshotSetKey: the key changes with the scale and with the sources that write it (not
// with their tests), and the set names the scale's nodes and namespaces.
func TestSnapshotSetKey(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "framework", "workload")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("deploy.go", "package workload // v1")
	s := Profiles["medium"]

	base, err := SnapshotSet(s, root)
	require.NoError(t, err)
	assert.Len(t, base.Key, 16)
	assert.Equal(t, s.Pods, base.Pods)
	assert.Equal(t, []string{"node-0", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}, base.Nodes)
	assert.Equal(t, []string{"scale-0", "scale-1", "scale-2", "scale-3", "scale-4"}, base.Namespaces)

	write("deploy_test.go", "package workload // a test")
	same, err := SnapshotSet(s, root)
	require.NoError(t, err)
	assert.Equal(t, base.Key, same.Key, "a test file changed the key")

	more := s
	more.Pods++
	other, err := SnapshotSet(more, root)
	require.NoError(t, err)
	assert.NotEqual(t, base.Key, other.Key, "the scale did not change the key")

	write("deploy.go", "package workload // v2")
	changed, err := SnapshotSet(s, root)
	require.NoError(t, err)
	assert.NotEqual(t, base.Key, changed.Key, "a source change did not change the key")

	_, err = SnapshotSet(s, t.TempDir())
	assert.ErrorContains(t, err, "no sources")
}
