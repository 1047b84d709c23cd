// Package subtest runs named subtests at once, each from a goroutine of its own, for tests whose
// subtests mostly wait (on istiod, on a timer) and must not queue behind go test's -parallel.
package subtest

import (
	"sync"
	"testing"
)

// Case is one named subtest.
type Case struct {
	Name string
	Run  func(t *testing.T)
}

// Concurrently runs the cases at once and returns when all have ended. t.Parallel would queue
// them behind go test's -parallel, which defaults to GOMAXPROCS: two at a time on a 2-core host,
// however long each one only waits.
func Concurrently(t *testing.T, cases ...Case) {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() { t.Run(c.Name, c.Run) })
	}
	wg.Wait()
}
