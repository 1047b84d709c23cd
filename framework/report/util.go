package report

import (
	"maps"
	"slices"
)

// sortedKeys gives maps a stable order in every output.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
