package join

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
)

// SampleInterval spaces the memory samples of one step.
const SampleInterval = 250 * time.Millisecond

// SettleCap is the longest a step waits after convergence before it samples istiod: bigger
// clusters (pods per cluster) keep istiod busy for longer.
func SettleCap(pods int) time.Duration {
	switch {
	case pods <= 500:
		return 6 * time.Second
	case pods <= 2000:
		return 20 * time.Second
	default:
		return 30 * time.Second
	}
}

// The adaptive settle: istiod's CPU read in QuietTick ticks; a step has settled when a steady
// window's worth of ticks in a row stayed in the idle band. The steady window is as long as the
// CPU source's resolution needs to resolve steadyTarget cores (at least minSteady).
const (
	QuietTick    = 250 * time.Millisecond
	steadyTarget = 0.001
	minSteady    = 2 * time.Second
	// provisionalLimit is the quiet limit before the idle band is known (the baseline waits for
	// istiod's own start-up work to end under it).
	provisionalLimit = 0.03
	// rereadWindows shapes a band read again after a capped settle: two steady windows of ticks,
	// the highest quarter left out (a collection of a large istiod heap spreads over several
	// ticks; what two left out gave: docs/measurements.md#why-the-settings-are-what-they-are).
	rereadWindows = 2
)

// Settler is how a step (the baseline, a join) waits before it samples istiod and reads its steady
// CPU: after fixed windows (-join.settle, -join.steady), or until istiod's CPU is back in its band.
type Settler struct {
	i              *mesh.Istiod
	samples        int
	max            time.Duration // SettleCap
	Fixed          bool
	Settle, steady time.Duration // fixed
	band           measure.CPUBand
	ticks          int // adaptive: quiet ticks in a row, the steady window
	limit          time.Duration
}

// NewSettler is the settle rule the join flags choose for istiod i in the run's clusters: fixed
// windows when -join.settle or -join.steady is set, else istiod's CPU back in its band.
func NewSettler(i *mesh.Istiod, x *expctx.Context) *Settler {
	o := x.Flags.Join
	longest := SettleCap(x.Scale.Pods)
	if o.Settle > 0 || o.Steady > 0 {
		s := &Settler{i: i, samples: o.Samples, max: longest, Fixed: true, Settle: longest, steady: min(4*time.Second, longest)}
		if o.Settle > 0 {
			s.Settle = o.Settle
		}
		if o.Steady > 0 {
			s.steady = o.Steady
		}
		s.steady = min(s.steady, s.Settle)
		return s
	}
	res := i.Sampler().CPUSource().Resolution()
	window := SteadyWindow(res, steadyTarget, minSteady)
	ticks := int(math.Ceil(float64(window) / float64(QuietTick)))
	return &Settler{i: i, samples: o.Samples, max: longest, ticks: ticks, limit: longest + window, band: measure.CPUBand{Tick: QuietTick, Limit: quietLimit(res)}}
}

// quietLimit is the provisional quiet limit for a CPU source that counts in steps of res seconds.
// As the idle band's, it stays above what one tick resolves (an in-cluster istiod's
// process_cpu_seconds_total counts in 10 ms), by two and a half steps: two steps over a tick read a
// little short of its length come out just above two steps' rate
// (docs/measurements.md#why-the-settings-are-what-they-are).
func quietLimit(res float64) float64 {
	return max(provisionalLimit, 2.5*res/QuietTick.Seconds())
}

// Rule says in the report how steps settled.
func (s *Settler) Rule() string {
	if s.Fixed {
		return fmt.Sprintf("fixed: %s after convergence, steady CPU over the %s before that (-join.settle, -join.steady)", s.Settle, s.steady)
	}
	return fmt.Sprintf("until istiod's CPU stayed under %.4f cores (its idle maximum + %.2f) for %d ticks of %s in a row, the steady window; at most %s; "+
		"after a step that reached that cap, the idle band read again over %d ticks, the highest quarter left out, and kept when higher (each join's limit is in the report)",
		s.band.Limit, s.band.Limit-s.band.Max, s.ticks, QuietTick, s.limit, rereadWindows*s.ticks)
}

// SteadyWindow is the length of the steady-CPU window.
func (s *Settler) SteadyWindow() time.Duration {
	if s.Fixed {
		return s.steady
	}
	return time.Duration(s.ticks) * QuietTick
}

// Sample is what one step (baseline or join) measured.
type Sample struct {
	measure.Settled
	Blended, Steady measure.CPUSpan
	SettledAfter    time.Duration
	Capped          bool
	// QuietLimit is the quiet limit the adaptive settle waited under (cores); Reread is the band
	// read again after it reached its cap, when higher than that limit (the later steps' band).
	QuietLimit float64
	Reread     *measure.CPUBand
}

// Baseline waits for the idle istiod to be quiet, learns its idle band from the steady window
// (adaptive), then samples it.
func (s *Settler) Baseline(ctx context.Context) (Sample, error) {
	from, err := ReadCPU(ctx, s.i)
	if err != nil {
		return Sample{}, err
	}
	if s.Fixed {
		return s.sampleAfter(ctx, from, time.Now(), nil)
	}
	q, err := WaitQuiet(ctx, s.i.Sampler(), s.band, s.ticks, 3*s.limit)
	if err != nil {
		return Sample{}, err
	}
	if q.Capped {
		return Sample{}, fmt.Errorf("istiod %s stayed above %.2f cores for %s after its start: it is not idle (rates %v)", s.i.Cluster(), s.band.Limit, 3*s.limit, q.Rates)
	}
	if s.band, err = s.i.Sampler().IdleBand(ctx, QuietTick, s.ticks); err != nil {
		return Sample{}, err
	}
	return s.sample(ctx, from, Sample{Steady: s.spanOf(s.band.Mean, s.ticks)}, nil)
}

// After waits until the step that began at from and converged at convergedAt has settled, then
// samples istiod; beforeMemory, when set, runs between the CPU reading and the memory samples.
func (s *Settler) After(ctx context.Context, from measure.CPUReading, convergedAt time.Time, beforeMemory func()) (Sample, error) {
	if s.Fixed {
		return s.sampleAfter(ctx, from, convergedAt, beforeMemory)
	}
	q, err := WaitQuiet(ctx, s.i.Sampler(), s.band, s.ticks, s.limit)
	if err != nil {
		return Sample{}, err
	}
	last := q.Rates[max(0, len(q.Rates)-s.ticks):]
	var sum float64
	for _, r := range last {
		sum += r
	}
	st := Sample{Steady: s.spanOf(sum/float64(len(last)), len(last)), SettledAfter: time.Since(convergedAt), Capped: q.Capped, QuietLimit: s.band.Limit}
	out, err := s.sample(ctx, from, st, beforeMemory)
	if err != nil || !q.Capped {
		return out, err
	}
	out.Reread, err = s.reread(ctx)
	return out, err
}

// reread reads istiod's idle band again after a settle that reached its cap, and keeps it when its
// limit is higher: istiod idles higher the more clusters it holds, so the baseline's band would
// cap every later step and its join CPU would count the cap's idle time
// (docs/suites.md#settle-windows). Memory samples and a cap lie between the join's burst and this
// reading.
func (s *Settler) reread(ctx context.Context) (*measure.CPUBand, error) {
	rates, err := s.i.Sampler().TickRates(ctx, QuietTick, rereadWindows*s.ticks)
	if err != nil {
		return nil, err
	}
	b := measure.BandOf(QuietTick, rates, s.i.Sampler().CPUSource().Resolution(), len(rates)/4)
	if b.Limit <= s.band.Limit {
		return nil, nil
	}
	s.band = b
	return &b, nil
}

// WaitQuiet waits until istiod's CPU stayed under the provisional limit for a second, at most
// SettleCap: what a check waits for after a change instead of a fixed sleep (the fixed rule's
// settle time under -join.settle).
func (s *Settler) WaitQuiet(ctx context.Context) error {
	if s.Fixed {
		SleepUntil(ctx, time.Now().Add(s.Settle))
		return nil
	}
	_, err := WaitQuiet(ctx, s.i.Sampler(), s.band, int(time.Second/QuietTick), s.max)
	return err
}

// spanOf is a steady window of n ticks at rate cores, with the source's resolution.
func (s *Settler) spanOf(rate float64, n int) measure.CPUSpan {
	wall := float64(n) * QuietTick.Seconds()
	return measure.CPUSpan{CPUSeconds: rate * wall, WallSeconds: wall, Resolution: s.i.Sampler().CPUSource().Resolution()}
}

// sampleAfter is the fixed rule: the steady window ends settle after convergedAt.
func (s *Settler) sampleAfter(ctx context.Context, from measure.CPUReading, convergedAt time.Time, beforeMemory func()) (Sample, error) {
	settleAt := convergedAt.Add(s.Settle)
	SleepUntil(ctx, settleAt.Add(-s.steady))
	steadyStart, err := ReadCPU(ctx, s.i)
	if err != nil {
		return Sample{}, err
	}
	SleepUntil(ctx, settleAt)
	end, err := ReadCPU(ctx, s.i)
	if err != nil {
		return Sample{}, err
	}
	steady, err := measure.SpanBetween(steadyStart, end)
	if err != nil {
		return Sample{}, fmt.Errorf("istiod %s steady CPU: %w", s.i.Cluster(), err)
	}
	return s.sample(ctx, from, Sample{Steady: steady, SettledAfter: time.Since(convergedAt)}, beforeMemory)
}

// sample reads the blended CPU from `from` to now, runs beforeMemory (if set), then takes the
// memory samples.
func (s *Settler) sample(ctx context.Context, from measure.CPUReading, st Sample, beforeMemory func()) (Sample, error) {
	end, err := ReadCPU(ctx, s.i)
	if err != nil {
		return st, err
	}
	if st.Blended, err = measure.SpanBetween(from, end); err != nil {
		return st, fmt.Errorf("istiod %s CPU: %w", s.i.Cluster(), err)
	}
	if beforeMemory != nil {
		beforeMemory()
	}
	if st.Settled, err = s.i.Sampler().Settled(ctx, s.samples, SampleInterval); err != nil {
		return st, fmt.Errorf("sampling istiod %s: %w", s.i.Cluster(), err)
	}
	return st, nil
}

// ReadCPU reads istiod's CPU time from its CPU source, naming the istiod on failure.
func ReadCPU(ctx context.Context, i *mesh.Istiod) (measure.CPUReading, error) {
	r, err := i.Sampler().ReadCPU(ctx)
	if err != nil {
		return r, fmt.Errorf("reading istiod %s CPU: %w", i.Cluster(), err)
	}
	return r, nil
}
