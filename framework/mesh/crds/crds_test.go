package crds

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/bins"
)

func TestLoadReadsPinnedCRDs(t *testing.T) {
	root, err := bins.SourceRoot()
	require.NoError(t, err)
	set, err := Load(context.Background(), root)
	require.NoError(t, err)
	names := set.Names()
	for _, want := range []string{
		"gateways.gateway.networking.k8s.io", "gatewayclasses.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io",
		"serviceentries.networking.istio.io", "authorizationpolicies.security.istio.io", "telemetries.telemetry.istio.io",
	} {
		assert.Contains(t, names, want)
	}
	for _, crd := range set {
		assert.Equal(t, "CustomResourceDefinition", crd.GetKind(), "only CRDs, no admission policies")
	}
}

// The CRDs of another istiod version come from that version's module, not the embedded ones.
func TestLoadFromVersionSourceDir(t *testing.T) {
	root, err := bins.SourceRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	chart := filepath.Join(dir, "manifests", "charts", "base", "files")
	require.NoError(t, os.MkdirAll(chart, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(chart, "crd-all.gen.yaml"), []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: onlyhere.networking.istio.io
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module istio.io/istio\n\nrequire (\n\tsigs.k8s.io/gateway-api v1.6.0\n)\n"), 0o644))
	set, err := LoadFrom(context.Background(), root, dir)
	require.NoError(t, err)
	names := set.Names()
	assert.Equal(t, "onlyhere.networking.istio.io", names[0])
	assert.NotContains(t, names, "serviceentries.networking.istio.io", "no embedded Istio CRDs mixed in")
	assert.Contains(t, names, "gateways.gateway.networking.k8s.io")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module istio.io/istio\n"), 0o644))
	_, err = LoadFrom(context.Background(), root, dir)
	assert.ErrorContains(t, err, "does not require sigs.k8s.io/gateway-api")
}

// TestWhereNoIstiodServesOnlyWhatIstiodReads: every CRD is kept with its names, labels and
// annotations (what istiod's CRD watcher holds), only Gateways and WorkloadEntries stay served and
// whole, and the
// loaded set is not changed.
func TestWhereNoIstiodServesOnlyWhatIstiodReads(t *testing.T) {
	root, err := bins.SourceRoot()
	require.NoError(t, err)
	set, err := Load(context.Background(), root)
	require.NoError(t, err)
	light := set.WhereNoIstiod()
	require.Equal(t, set.Names(), light.Names())
	for i, crd := range light {
		orig := set[i]
		assert.Equal(t, orig.GetLabels(), crd.GetLabels(), crd.GetName())
		assert.Equal(t, orig.GetAnnotations(), crd.GetAnnotations(), crd.GetName())
		assert.True(t, isServed(orig), "loaded %s is served", crd.GetName())
		if crd.GetName() == "gateways.gateway.networking.k8s.io" || crd.GetName() == "workloadentries.networking.istio.io" {
			assert.Same(t, orig, crd, "what istiod reads stays as loaded")
			continue
		}
		assert.False(t, isServed(crd), "%s is served", crd.GetName())
		gvr, err := storageGVR(crd)
		require.NoError(t, err)
		want, _ := storageGVR(orig)
		assert.Equal(t, want, gvr, "%s keeps its storage version", crd.GetName())
	}
}
