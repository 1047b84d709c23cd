package measure

import (
	"fmt"
	"math"
	"time"
)

// CPURate is istiod's average CPU use between two scrapes, in cores:
// (b.CPUSecondsTotal - a.CPUSecondsTotal) / (b.At - a.At in seconds). It is NaN when the wall
// interval is not positive or the counter went backwards (istiod restarted in between), so a
// bad window cannot pass for a measurement.
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

// CPUWindow is the span between two scrapes of the same istiod. The design uses two kinds:
//   - the one-off join cost: Start scraped just before the remote secret is created, End at
//     convergence plus a settle time (60 s at published scale); read CPUSeconds.
//   - the steady rate: a window that starts well after the join burst (e.g. the 30 s ending 60 s
//     after convergence); read Cores.
//
// process_cpu_seconds_total has 10 ms resolution (clock ticks), so a window of W seconds cannot
// resolve rates below about 0.01/W cores: at the ~0.0002 cores measured by hand a steady window
// needs to be a minute or more to show more than a tick or two.
type CPUWindow struct {
	Start, End *Metrics
}

// Duration is the wall time between the two scrapes.
func (w CPUWindow) Duration() time.Duration {
	if w.Start == nil || w.End == nil {
		return 0
	}
	return w.End.At.Sub(w.Start.At)
}

// CPUSeconds is the CPU time istiod used in the window.
func (w CPUWindow) CPUSeconds() (float64, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	return w.End.CPUSecondsTotal - w.Start.CPUSecondsTotal, nil
}

// Cores is the average CPU use in the window (CPURate of its ends).
func (w CPUWindow) Cores() (float64, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	return CPURate(w.Start, w.End), nil
}

func (w CPUWindow) check() error {
	switch {
	case w.Start == nil || w.End == nil:
		return fmt.Errorf("CPU window lacks its start or end scrape")
	case !w.End.At.After(w.Start.At):
		return fmt.Errorf("CPU window ends at %s, not after its start %s",
			w.End.At.Format(time.RFC3339Nano), w.Start.At.Format(time.RFC3339Nano))
	case w.End.CPUSecondsTotal < w.Start.CPUSecondsTotal:
		return fmt.Errorf("CPU window: %s fell from %g to %g (istiod restarted?)",
			MetricCPUSeconds, w.Start.CPUSecondsTotal, w.End.CPUSecondsTotal)
	}
	return nil
}
