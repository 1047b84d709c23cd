package proc

import "sync"

// StopParallel calls stop on every item at once and waits for all: stopping N processes costs the
// slowest one's grace period, not the sum.
func StopParallel[T any](items []T, stop func(T)) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		go func() { defer wg.Done(); stop(it) }()
	}
	wg.Wait()
}
