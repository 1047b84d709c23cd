package join

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/measure/measuretest"
)

func TestWaitQuietEndsWhenTheBurstIsOver(t *testing.T) {
	i := measuretest.Burner(t, 1500*time.Millisecond)
	band := measure.CPUBand{Tick: 200 * time.Millisecond, Limit: 0.05}
	q, err := WaitQuiet(context.Background(), i, band, 3, 10*time.Second)
	require.NoError(t, err)
	assert.False(t, q.Capped, "the burst ended inside the cap: rates %v", q.Rates)
	assert.Greater(t, q.After, 1300*time.Millisecond, "not before the burst is over: rates %v", q.Rates)
	assert.Less(t, q.After, 4*time.Second, "soon after it: rates %v", q.Rates)
	assert.Greater(t, q.Rates[0], 4*band.Limit, "the first tick saw the burst (a spinning process, even on a busy host)")
	for _, r := range q.Rates[len(q.Rates)-3:] {
		assert.LessOrEqual(t, r, band.Limit, "the last three ticks were quiet")
	}
}

func TestWaitQuietStopsAtItsCap(t *testing.T) {
	i := measuretest.Burner(t, time.Minute)
	q, err := WaitQuiet(context.Background(), i, measure.CPUBand{Tick: 200 * time.Millisecond, Limit: 0.05}, 3, time.Second)
	require.NoError(t, err)
	assert.True(t, q.Capped, "a process that never quiets ends at the cap")
	assert.LessOrEqual(t, q.After, time.Second+100*time.Millisecond)
}

func TestSteadyWindowFollowsTheResolution(t *testing.T) {
	assert.Equal(t, 2*time.Second, SteadyWindow(measure.SchedstatResolution, 0.001, 2*time.Second), "nanoseconds need nothing beyond the least")
	assert.Equal(t, 10*time.Second, SteadyWindow(measure.MetricCPUResolution, 0.001, 2*time.Second), "10 ms ticks need 10 s for a thousandth of a core")
}
