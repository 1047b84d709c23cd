package istiodcheck

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A window grows with what the run measured and with the istiods sharing the host, and never
// drops below the floor that small clusters need.
func TestWindowGrowsWithTheRunsOwnWork(t *testing.T) {
	assert.Equal(t, 10*time.Second, Window{Undisturbed: 100 * time.Millisecond, AtOnce: 3}.Duration(), "the floor")
	assert.Equal(t, 18*time.Second, Window{Undisturbed: 2 * time.Second, AtOnce: 3}.Duration())
	assert.Equal(t, 12*time.Second, Window{Undisturbed: 4 * time.Second}.Duration(), "one istiod when AtOnce is unset")
	assert.Equal(t, "18.0s (3 x the undisturbed 2.0s x 3 at once, at least 10s)", Window{Undisturbed: 2 * time.Second, AtOnce: 3}.String())
}

// A slowed transfer that keeps moving keeps the wait open; once it stands still for the quiet
// window, an unserved remote is judged.
func TestServedAfterWaitsOutTheTransfer(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	moving := func() time.Time { // moves for 300 ms, then stands still
		if time.Since(start) < 300*time.Millisecond {
			return time.Now()
		}
		return start.Add(300 * time.Millisecond)
	}
	assert.False(t, servedAfter(ctx, func() bool { return false }, moving, start, 100*time.Millisecond))
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "not judged while the transfer moved, nor before it stood still for the quiet window")

	start = time.Now()
	servedAt := start.Add(350 * time.Millisecond) // after the transfer ends, inside the quiet window
	assert.True(t, servedAfter(ctx, func() bool { return time.Now().After(servedAt) }, moving, start, 200*time.Millisecond))

	start = time.Now()
	never := func() time.Time { return time.Time{} }
	assert.False(t, servedAfter(ctx, func() bool { return false }, never, start, 100*time.Millisecond), "a transfer that never starts counts from the start")
}
