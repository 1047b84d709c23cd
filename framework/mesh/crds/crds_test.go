package crds

import (
	"context"
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
