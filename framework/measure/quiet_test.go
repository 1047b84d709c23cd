package measure

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// burner starts a real process that spins on a CPU (shell builtins only, so the CPU is its own)
// until busy has passed, then sleeps, and returns an Istiod whose CPU source is that process's
// schedstat: the settle logic meets a real burst and a real quiet process. A burner with no busy
// time is returned once its shell has started its sleep and waits on it, using no CPU from then
// on: before that, its own start does, and on a busy host (four test packages at once) that
// reached 17 ms of CPU in a 200 ms tick.
func burner(t *testing.T, busy time.Duration) *Istiod {
	t.Helper()
	stop := filepath.Join(t.TempDir(), "stop")
	cmd := exec.Command("sh", "-c", `while [ ! -e "$1" ]; do :; done; sleep 60`, "burner", stop)
	require.NoError(t, cmd.Start())
	timer := time.AfterFunc(busy, func() { _ = os.WriteFile(stop, nil, 0o600) })
	t.Cleanup(func() { timer.Stop(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if busy == 0 {
		children := fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)
		require.Eventually(t, func() bool {
			data, err := os.ReadFile(children)
			return err == nil && len(strings.TrimSpace(string(data))) > 0
		}, 10*time.Second, 10*time.Millisecond, "the burner never started its sleep")
	}
	return &Istiod{Name: "burner", CPU: NewSchedstat(cmd.Process.Pid)}
}

func TestWaitQuietEndsWhenTheBurstIsOver(t *testing.T) {
	i := burner(t, 1500*time.Millisecond)
	band := CPUBand{Tick: 200 * time.Millisecond, Limit: 0.05}
	q, err := i.WaitQuiet(context.Background(), band, 3, 10*time.Second)
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
	i := burner(t, time.Minute)
	q, err := i.WaitQuiet(context.Background(), CPUBand{Tick: 200 * time.Millisecond, Limit: 0.05}, 3, time.Second)
	require.NoError(t, err)
	assert.True(t, q.Capped, "a process that never quiets ends at the cap")
	assert.LessOrEqual(t, q.After, time.Second+100*time.Millisecond)
}

func TestIdleBandOfAQuietProcess(t *testing.T) {
	i := burner(t, 0)
	b, err := i.IdleBand(context.Background(), 200*time.Millisecond, 5)
	require.NoError(t, err)
	assert.Less(t, b.Max, 0.01, "a sleeping process uses next to nothing")
	assert.InDelta(t, b.Max+bandFloor, b.Limit, 1e-9, "the limit is its maximum plus the floor")
}

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

func TestSteadyWindowFollowsTheResolution(t *testing.T) {
	assert.Equal(t, 2*time.Second, SteadyWindow(SchedstatResolution, 0.001, 2*time.Second), "nanoseconds need nothing beyond the least")
	assert.Equal(t, 10*time.Second, SteadyWindow(MetricCPUResolution, 0.001, 2*time.Second), "10 ms ticks need 10 s for a thousandth of a core")
}
