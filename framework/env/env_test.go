package env

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setupWith runs the environment setup with flags f and no extra steps, then tears down.
func setupWith(t *testing.T, f Flags) error {
	t.Helper()
	e := &Env{Log: io.Discard, Flags: f, start: time.Now()}
	err := e.setup(context.Background(), nil)
	e.teardown()
	if e.RunDir != "" {
		_, statErr := os.Stat(e.RunDir)
		assert.True(t, os.IsNotExist(statErr), "run directory %s removed after a failed setup", e.RunDir)
	}
	return err
}

func TestSetupRejectsBadInputBeforeStartingAnything(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "topo.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("clusters:\n- name: a\n- name: a\n"), 0o644))
	unknownField := filepath.Join(dir, "typo.yaml")
	require.NoError(t, os.WriteFile(unknownField, []byte("clusters:\n- name: a\n  netwrok: n1\n"), 0o644))
	remote := filepath.Join(dir, "remote.json")
	require.NoError(t, os.WriteFile(remote, []byte(`[{"kind":"Kubernetes","clusterName":"p"},{"kind":"Kubernetes","clusterName":"r","primaryClusterName":"p"}]`), 0o644))

	for _, tc := range []struct {
		name  string
		flags Flags
		want  []string
	}{
		{"duplicate cluster", Flags{Topology: bad, Provider: "local"}, []string{bad, "clusters[1].name", "duplicate"}},
		{"unknown field", Flags{Topology: unknownField, Provider: "local"}, []string{unknownField, "netwrok"}},
		{"missing file", Flags{Topology: filepath.Join(dir, "nope.yaml"), Provider: "local"}, []string{"nope.yaml", "-topology"}},
		{"zero clusters", Flags{Clusters: 0, Provider: "local"}, []string{"-clusters"}},
		{"too many clusters", Flags{Clusters: 51, Provider: "local"}, []string{"-clusters", "50"}},
		{"unknown provider", Flags{Clusters: 2, Provider: "minikube"}, []string{"-provider=minikube", "local, kind, kube"}},
		{"provider not built yet", Flags{Clusters: 2, Provider: "kind"}, []string{"-provider=kind", "not implemented yet"}},
		{"remote on local", Flags{Topology: remote, Provider: "local"}, []string{"r", "local provider", "primaryClusterName"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := setupWith(t, tc.flags)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestCleanupsRunNewestFirstAndOnce(t *testing.T) {
	e := &Env{Log: io.Discard}
	var order []string
	e.Cleanup("first", func() error { order = append(order, "first"); return nil })
	e.Cleanup("second", func() error { order = append(order, "second"); return nil })
	e.teardown()
	e.teardown()
	assert.Equal(t, []string{"second", "first"}, order)
}
