package istiodcheck

import (
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
