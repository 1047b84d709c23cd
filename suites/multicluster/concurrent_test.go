package multicluster

import (
	"sync"
	"testing"
)

// subtest is one named subtest of runConcurrently.
type subtest struct {
	name string
	run  func(t *testing.T)
}

// runConcurrently runs the subtests at once, each from a goroutine of its own, and returns when
// all have ended. t.Parallel would queue them behind go test's -parallel, which defaults to
// GOMAXPROCS: two at a time on a 2-core host, however long each one only waits.
func runConcurrently(t *testing.T, tests ...subtest) {
	t.Helper()
	var wg sync.WaitGroup
	for _, st := range tests {
		wg.Go(func() { t.Run(st.name, st.run) })
	}
	wg.Wait()
}
