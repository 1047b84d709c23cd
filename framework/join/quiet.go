package join

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ambientmc/ambientmc/framework/measure"
)

// Quiet is how a settle wait ended.
type Quiet struct {
	// After is how long the wait took; Capped says it reached its cap instead of the band.
	After  time.Duration
	Capped bool
	// Rates are the ticks' rates in cores, in order.
	Rates []float64
}

// WaitQuiet waits until k consecutive ticks of istiod's CPU rate, read by i, stay under the band's
// limit (a join's burst is over), or until limit passes. It fails only when istiod cannot be read.
func WaitQuiet(ctx context.Context, i *measure.Sampler, band measure.CPUBand, k int, limit time.Duration) (Quiet, error) {
	if band.Tick <= 0 || k < 1 {
		return Quiet{}, fmt.Errorf("istiod %s: WaitQuiet needs a tick and k >= 1 (tick %s, k %d)", i.Name, band.Tick, k)
	}
	start := time.Now()
	q := Quiet{}
	run := 0
	err := i.EachTick(ctx, band.Tick, func(cores float64) bool {
		q.Rates = append(q.Rates, cores)
		if cores <= band.Limit {
			run++
		} else {
			run = 0
		}
		q.After = time.Since(start)
		if run >= k {
			return false
		}
		if q.After+band.Tick > limit {
			q.Capped = true
			return false
		}
		return true
	})
	return q, err
}

// SteadyWindow is how long a steady-CPU window must be for a source of resolution res (CPU
// seconds) to resolve target cores: res/target, at least least. schedstat's nanoseconds need
// nothing beyond least; process_cpu_seconds_total's 10 ms ticks need 10 s for a thousandth of a
// core.
func SteadyWindow(res, target float64, least time.Duration) time.Duration {
	if target <= 0 || math.IsNaN(res) {
		return least
	}
	return max(least, time.Duration(res/target*float64(time.Second)))
}
