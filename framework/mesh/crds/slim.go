package crds

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Slim returns copies of the CRDs without what only serves people editing objects: the
// schemas' descriptions (most of each CRD's bytes, held again in the API server's OpenAPI
// documents) and their CEL validation rules (each compiled and kept per CRD version). Objects
// are stored, defaulted, served and watched the same, and istiod reads objects, never schemas.
// Measured with the CRDs seeded (3 clusters, API server plus etcd share per cluster): 440 MB
// as loaded, 419 MB without descriptions, 375 MB without CEL rules, 369 MB without both.
func Slim(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		c := o.DeepCopy()
		// Edited in place: c is already a copy, and NestedSlice would copy the versions again.
		spec, _ := c.Object["spec"].(map[string]any)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			if m, ok := v.(map[string]any); ok {
				if s, ok := m["schema"].(map[string]any); ok {
					slimSchema(s["openAPIV3Schema"])
				}
			}
		}
		out[i] = c
	}
	return out
}

// slimSchema drops description strings and x-kubernetes-validations lists from a JSON schema in
// place. A property that happens to be named like either is a schema (a map) and stays.
func slimSchema(v any) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["description"].(string); ok {
			delete(x, "description")
		}
		if _, ok := x["x-kubernetes-validations"].([]any); ok {
			delete(x, "x-kubernetes-validations")
		}
		for _, child := range x {
			slimSchema(child)
		}
	case []any:
		for _, e := range x {
			slimSchema(e)
		}
	}
}
