package measure

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ambientmc/ambientmc/framework/stats"
)

// CPUBand is what "back at baseline" means for istiod's CPU: the rate in short ticks while it is
// idle, and the limit a tick must stay under to count as quiet after a burst.
type CPUBand struct {
	Tick time.Duration
	// Mean and Max are the idle ticks' rates, in cores.
	Mean, Max float64
	// Limit is the quiet limit: the idle ticks' highest rate plus a floor that keeps it above the
	// CPU source's resolution over one tick and above the idle noise.
	Limit float64
}

// bandFloor is the least headroom above the idle maximum, in cores: a hundredth of a core is
// what the published figure gives per remote cluster, far above an idle istiod's own noise at
// small scale (measured 0.001-0.004 cores in 0.5 s ticks), and far below a join's burst.
const bandFloor = 0.01

// IdleBand reads istiod's CPU over n ticks while nothing happens to it and returns its band.
func (i *Istiod) IdleBand(ctx context.Context, tick time.Duration, n int) (CPUBand, error) {
	rates, err := i.TickRates(ctx, tick, n)
	if err != nil {
		return CPUBand{}, err
	}
	return BandOf(tick, rates, i.CPUSource().Resolution(), 0), nil
}

// BandOf is the band of idle tick rates read by a source of resolution res, leaving the drop
// highest out of its maximum: a long reading of an istiod holding many clusters can catch a
// garbage collection of its heap, ticks of a large fraction of a core that are not its idleness.
func BandOf(tick time.Duration, rates []float64, res float64, drop int) CPUBand {
	sorted := slices.Sorted(slices.Values(rates))
	top := sorted[max(0, len(sorted)-1-drop)]
	b := CPUBand{Tick: tick, Mean: stats.Mean(rates), Max: top}
	b.Limit = b.Max + max(bandFloor, 2*res/tick.Seconds())
	return b
}

// TickRates reads n consecutive tick-long CPU rates.
func (i *Istiod) TickRates(ctx context.Context, tick time.Duration, n int) ([]float64, error) {
	out := make([]float64, 0, n)
	err := i.eachTick(ctx, tick, func(cores float64) bool {
		out = append(out, cores)
		return len(out) < n
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachTick reads istiod's CPU every tick and hands each tick's rate in cores to next until it
// returns false.
func (i *Istiod) eachTick(ctx context.Context, tick time.Duration, next func(cores float64) bool) error {
	prev, err := i.ReadCPU(ctx)
	if err != nil {
		return err
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		cur, err := i.ReadCPU(ctx)
		if err != nil {
			return err
		}
		span, err := SpanBetween(prev, cur)
		if err != nil {
			return err
		}
		prev = cur
		if !next(span.Cores()) {
			return nil
		}
	}
}

// Quiet is how a settle wait ended.
type Quiet struct {
	// After is how long the wait took; Capped says it reached its cap instead of the band.
	After  time.Duration
	Capped bool
	// Rates are the ticks' rates in cores, in order.
	Rates []float64
}

// WaitQuiet waits until k consecutive ticks of istiod's CPU rate stay under the band's limit (a
// join's burst is over), or until limit passes. It fails only when istiod cannot be read.
func (i *Istiod) WaitQuiet(ctx context.Context, band CPUBand, k int, limit time.Duration) (Quiet, error) {
	if band.Tick <= 0 || k < 1 {
		return Quiet{}, fmt.Errorf("istiod %s: WaitQuiet needs a tick and k >= 1 (tick %s, k %d)", i.Name, band.Tick, k)
	}
	start := time.Now()
	q := Quiet{}
	run := 0
	err := i.eachTick(ctx, band.Tick, func(cores float64) bool {
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
