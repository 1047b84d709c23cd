package local

import (
	"context"
	"encoding/json"
	"sort"
	"testing"

	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSlimCRDsKeepEveryFieldDropOnlyProse checks on the real Istio and Gateway API CRDs that
// slimming keeps every field, type, default and enum (what pruning and defaulting act on) and
// drops only descriptions and CEL rules, without touching the CRDs it was given.
func TestSlimCRDsKeepEveryFieldDropOnlyProse(t *testing.T) {
	set := pinnedCRDs(t, context.Background())
	before := size(t, set)
	slim := crds.Slim(set)
	require.Len(t, slim, len(set))
	assert.Equal(t, before, size(t, set), "the input was changed")
	for i := range set {
		name := set[i].GetName()
		assert.Equal(t, schemaShape(set[i].Object), schemaShape(slim[i].Object), name)
		raw, err := json.Marshal(slim[i].Object)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), `"x-kubernetes-validations"`, name)
	}
	t.Logf("CRDs: %d bytes as loaded, %d slimmed", before, size(t, slim))
	assert.Less(t, size(t, slim), before/2, "descriptions are most of the CRDs' bytes")
}

// TestSlimCRDsKeepsAPropertyNamedDescription: a field called description is a schema, not prose.
func TestSlimCRDsKeepsAPropertyNamedDescription(t *testing.T) {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"versions": []any{map[string]any{"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"description": "prose",
			"type":        "object",
			"properties": map[string]any{
				"description":              map[string]any{"type": "string", "description": "prose"},
				"x-kubernetes-validations": map[string]any{"type": "string"},
			},
			"x-kubernetes-validations": []any{map[string]any{"rule": "true"}},
		}}}}},
	}}
	got := crds.Slim([]*unstructured.Unstructured{crd})[0]
	root, _, _ := unstructured.NestedSlice(got.Object, "spec", "versions")
	schema := root[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	assert.Equal(t, map[string]any{
		"type": "object",
		"properties": map[string]any{
			"description":              map[string]any{"type": "string"},
			"x-kubernetes-validations": map[string]any{"type": "string"},
		},
	}, schema)
}

// schemaShape lists every schema path with its non-prose keywords and their values.
func schemaShape(obj map[string]any) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				if k == "x-kubernetes-validations" {
					continue
				}
				if _, prose := child.(string); prose && k == "description" {
					continue
				}
				walk(path+"/"+k, child)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		default:
			raw, _ := json.Marshal(x)
			out = append(out, path+"="+string(raw))
		}
	}
	walk("", obj["spec"])
	sort.Strings(out)
	return out
}

func size(t *testing.T, set []*unstructured.Unstructured) int {
	n := 0
	for _, o := range set {
		raw, err := json.Marshal(o.Object)
		require.NoError(t, err)
		n += len(raw)
	}
	return n
}
