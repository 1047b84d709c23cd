package measure

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Ticks an istiod holding 39 remote clusters read while idle (schedstat, 250 ms), one of them a
// collection of its heap: left out, the band follows the idle ticks, not the collection.
func TestBandOfLeavesTheHighestTicksOut(t *testing.T) {
	rates := []float64{0.007, 0.042, 0.001, 0.818, 0.007, 0.014, 0.008, 0.003}
	all := BandOf(250*time.Millisecond, rates, 1e-9, 0)
	assert.InDelta(t, 0.818+bandFloor, all.Limit, 1e-9, "nothing left out: the collection sets the limit")
	one := BandOf(250*time.Millisecond, rates, 1e-9, 1)
	assert.InDelta(t, 0.042, one.Max, 1e-9, "the highest left out")
	assert.InDelta(t, 0.042+bandFloor, one.Limit, 1e-9)
	assert.InDelta(t, 0.1125, one.Mean, 1e-9, "the mean is every tick's")
	coarse := BandOf(250*time.Millisecond, rates, 0.01, 2)
	assert.InDelta(t, 0.014+0.08, coarse.Limit, 1e-9, "a 10 ms source's two steps per tick above the maximum")
	assert.InDelta(t, 0.001, BandOf(time.Second, rates, 1e-9, 100).Max, 1e-9, "dropping more than there are keeps the lowest")
}
