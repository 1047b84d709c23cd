package istiodcheck

import (
	"fmt"
	"time"
)

// Window is how long a check waits for something a healthy istiod does, derived from what the
// same thing took undisturbed at the run's own scale, so that a check fails on a fault and not on
// a slow host or a large cluster.
type Window struct {
	// Undisturbed is what the control case measured; AtOnce how many istiods do the work
	// together while the window runs (they share the host's CPUs).
	Undisturbed time.Duration
	AtOnce      int
}

const (
	// windowFactor covers the spread of one istiod's time between runs on a busy host.
	windowFactor = 3
	// WindowFloor keeps small clusters' windows (a sync in 0.1 s) clear of scheduling noise.
	WindowFloor = 10 * time.Second
)

// Duration is windowFactor times the undisturbed time, times the istiods at work together, and
// at least WindowFloor.
func (w Window) Duration() time.Duration {
	return max(WindowFloor, time.Duration(windowFactor*max(1, w.AtOnce))*w.Undisturbed)
}

// String says the window and where it came from, for a check's detail.
func (w Window) String() string {
	return fmt.Sprintf("%.1fs (%d x the undisturbed %.1fs x %d at once, at least %s)",
		w.Duration().Seconds(), windowFactor, w.Undisturbed.Seconds(), max(1, w.AtOnce), WindowFloor)
}
