package measure

import (
	"context"
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
func (i *Sampler) IdleBand(ctx context.Context, tick time.Duration, n int) (CPUBand, error) {
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
func (i *Sampler) TickRates(ctx context.Context, tick time.Duration, n int) ([]float64, error) {
	out := make([]float64, 0, n)
	err := i.EachTick(ctx, tick, func(cores float64) bool {
		out = append(out, cores)
		return len(out) < n
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EachTick reads istiod's CPU every tick and hands each tick's rate in cores to next until it
// returns false.
func (i *Sampler) EachTick(ctx context.Context, tick time.Duration, next func(cores float64) bool) error {
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
