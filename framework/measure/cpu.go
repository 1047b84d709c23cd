package measure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// CPUSource reads the cumulative CPU time of one istiod process.
type CPUSource interface {
	// CPUSeconds is the CPU time (user + system, all threads) the process has used so far.
	CPUSeconds(ctx context.Context) (float64, error)
	// Resolution is the smallest step of CPUSeconds, in seconds: a difference of two readings
	// is known only to within it.
	Resolution() float64
	// Name says where the figures come from, for the report (e.g. "schedstat").
	Name() string
}

// MetricCPUResolution is the step of process_cpu_seconds_total: client_golang reads utime+stime
// from /proc/PID/stat, which counts USER_HZ = 100 ticks per second.
const MetricCPUResolution = 0.01

// MetricCPU is the fallback CPUSource: istiod's own process_cpu_seconds_total, in 10 ms steps.
type MetricCPU struct{ Istiod *Sampler }

// CPUSeconds scrapes istiod once.
func (m MetricCPU) CPUSeconds(ctx context.Context) (float64, error) {
	s, err := m.Istiod.Scrape(ctx)
	if err != nil {
		return 0, err
	}
	return s.CPUSecondsTotal, nil
}

// Resolution is MetricCPUResolution.
func (MetricCPU) Resolution() float64 { return MetricCPUResolution }

// Name is the metric's name.
func (MetricCPU) Name() string { return MetricCPUSeconds }

// CPUSource is i.CPU, or the metric fallback when none is set.
func (i *Sampler) CPUSource() CPUSource {
	if i.CPU != nil {
		return i.CPU
	}
	return MetricCPU{Istiod: i}
}

// CPUReading is one reading of istiod's cumulative CPU time.
type CPUReading struct {
	// At is the midpoint of the read.
	At         time.Time
	Seconds    float64
	Resolution float64 // seconds, from the source
	Source     string
}

// ReadCPU reads istiod's CPU time from its CPUSource.
func (i *Sampler) ReadCPU(ctx context.Context) (CPUReading, error) {
	src := i.CPUSource()
	start := time.Now()
	s, err := src.CPUSeconds(ctx)
	if err != nil {
		return CPUReading{}, fmt.Errorf("istiod %s: CPU from %s: %w", i.Name, src.Name(), err)
	}
	end := time.Now()
	return CPUReading{At: start.Add(end.Sub(start) / 2), Seconds: s, Resolution: src.Resolution(), Source: src.Name()}, nil
}

// CPUSpan is the CPU istiod used between two readings.
type CPUSpan struct {
	CPUSeconds  float64
	WallSeconds float64
	// Resolution is the CPU-seconds step of the coarser reading: CPUSeconds is known to within it.
	Resolution float64
}

// SpanBetween is the CPU used from a to b. It fails when b is not after a or the counter went
// backwards (istiod restarted), so a bad window cannot pass for a measurement.
func SpanBetween(a, b CPUReading) (CPUSpan, error) {
	wall := b.At.Sub(a.At).Seconds()
	switch {
	case a.At.IsZero() || b.At.IsZero():
		return CPUSpan{}, errors.New("CPU span lacks its start or end reading")
	case wall <= 0:
		return CPUSpan{}, fmt.Errorf("CPU span ends at %s, not after its start %s",
			b.At.Format(time.RFC3339Nano), a.At.Format(time.RFC3339Nano))
	case b.Seconds < a.Seconds:
		return CPUSpan{}, fmt.Errorf("CPU time fell from %g to %g s (istiod restarted?)", a.Seconds, b.Seconds)
	}
	return CPUSpan{CPUSeconds: b.Seconds - a.Seconds, WallSeconds: wall, Resolution: max(a.Resolution, b.Resolution)}, nil
}

// Cores is the average CPU use over the span.
func (s CPUSpan) Cores() float64 { return s.CPUSeconds / s.WallSeconds }

// CoresResolution is the smallest average the span can show: its resolution over its length.
// A 4 s window of a 10 ms counter cannot tell 0 from 0.0025 cores.
func (s CPUSpan) CoresResolution() float64 { return s.Resolution / s.WallSeconds }

// CPURate is istiod's average CPU use between two scrapes, in cores:
// (b.CPUSecondsTotal - a.CPUSecondsTotal) / (b.At - a.At in seconds), in steps of
// MetricCPUResolution over the interval. It is NaN when the wall interval is not positive or the
// counter went backwards (istiod restarted in between), so a bad window cannot pass for a
// measurement. Prefer ReadCPU and SpanBetween, which carry the resolution.
func CPURate(a, b *Metrics) float64 {
	if a == nil || b == nil {
		return math.NaN()
	}
	wall := b.At.Sub(a.At).Seconds()
	cpu := b.CPUSecondsTotal - a.CPUSecondsTotal
	if wall <= 0 || cpu < 0 {
		return math.NaN()
	}
	return cpu / wall
}
