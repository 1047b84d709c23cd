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
	rates, err := i.tickRates(ctx, tick, n)
	if err != nil {
		return CPUBand{}, err
	}
	b := CPUBand{Tick: tick, Mean: stats.Mean(rates), Max: slices.Max(rates)}
	res := i.CPUSource().Resolution() / tick.Seconds()
	b.Limit = b.Max + max(bandFloor, 2*res)
	return b, nil
}

// tickRates reads n consecutive tick-long CPU rates.
func (i *Istiod) tickRates(ctx context.Context, tick time.Duration, n int) ([]float64, error) {
	prev, err := i.ReadCPU(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]float64, 0, n)
	t := time.NewTicker(tick)
	defer t.Stop()
	for len(out) < n {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		cur, err := i.ReadCPU(ctx)
		if err != nil {
			return nil, err
		}
		span, err := SpanBetween(prev, cur)
		if err != nil {
			return nil, err
		}
		out = append(out, span.Cores())
		prev = cur
	}
	return out, nil
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
	prev, err := i.ReadCPU(ctx)
	if err != nil {
		return Quiet{}, err
	}
	q := Quiet{}
	t := time.NewTicker(band.Tick)
	defer t.Stop()
	run := 0
	for {
		select {
		case <-ctx.Done():
			return q, context.Cause(ctx)
		case <-t.C:
		}
		cur, err := i.ReadCPU(ctx)
		if err != nil {
			return q, err
		}
		span, err := SpanBetween(prev, cur)
		if err != nil {
			return q, err
		}
		prev = cur
		q.Rates = append(q.Rates, span.Cores())
		if span.Cores() <= band.Limit {
			run++
		} else {
			run = 0
		}
		q.After = time.Since(start)
		if run >= k {
			return q, nil
		}
		if q.After+band.Tick > limit {
			q.Capped = true
			return q, nil
		}
	}
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
