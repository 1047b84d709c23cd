// Package binstest gives other packages' tests the binaries `make bins` builds, skipping a test
// when they are not built (building them takes minutes). Only tests import it.
package binstest

import (
	"context"
	"testing"

	"github.com/ambientmc/ambientmc/framework/bins"
)

// PilotDiscovery is the path of the pinned istiod binary, or skips tb when it is not built.
func PilotDiscovery(tb testing.TB, ctx context.Context) string {
	tb.Helper()
	cache, err := bins.Default()
	if err != nil {
		tb.Fatal(err)
	}
	if missing, err := cache.Missing(bins.PilotDiscovery); err != nil || len(missing) > 0 {
		tb.Skipf("pilot-discovery not built (%v %v): run `make bins`", missing, err)
	}
	paths, err := cache.Ensure(ctx, bins.PilotDiscovery)
	if err != nil {
		tb.Fatal(err)
	}
	return paths[bins.PilotDiscovery]
}
