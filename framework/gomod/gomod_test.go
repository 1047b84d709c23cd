package gomod

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "go.mod")
	require.NoError(t, os.WriteFile(path, []byte("module m\n\ngo 1.26\n\nrequire a.example/one v1.2.3\n\nrequire (\n\tb.example/two v0.4.0 // indirect\n)\n"), 0o600))
	v, err := Required(path, "a.example/one")
	require.NoError(t, err)
	assert.Equal(t, "v1.2.3", v)
	v, err = Required(path, "b.example/two")
	require.NoError(t, err)
	assert.Equal(t, "v0.4.0", v)
	_, err = Required(path, "c.example/three")
	assert.ErrorContains(t, err, "does not require c.example/three")
}
