package churn

import (
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/measure"
)

// CPUTick is the resolution of process_cpu_seconds_total: /proc clock ticks of 10 ms.
const CPUTick = 0.01

// Cost is what istiod spent over a churn window, from a scrape before and one after.
type Cost struct {
	// CPUCores is the average CPU use; ResolutionCores is one tick over the window, below which
	// a reading means "less than this", not a value.
	CPUCores, ResolutionCores float64
	// PushesPerSecond sums pilot_xds_pushes over types (send errors excluded); ByType splits it
	// ("wds", "cds", ...). istiod counts one push per connected client.
	PushesPerSecond float64
	ByType          map[string]float64
	// ConnectedXDS is the pilot_xds gauge at the end of the window.
	ConnectedXDS float64
	Seconds      float64
}

// CostBetween computes istiod's cost from two scrapes of the same istiod.
//
// The CPU source is process_cpu_seconds_total through measure.CPUWindow; when measure.Istiod
// gains a finer CPU counter, read it here and shrink ResolutionCores to match.
func CostBetween(a, b *measure.Metrics) (Cost, error) {
	w := measure.CPUWindow{Start: a, End: b}
	cores, err := w.Cores()
	if err != nil {
		return Cost{}, err
	}
	secs := w.Duration().Seconds()
	c := Cost{CPUCores: cores, ResolutionCores: CPUTick / secs, Seconds: secs, ConnectedXDS: b.ConnectedXDS}
	before, after := PushesByType(a), PushesByType(b)
	c.ByType = map[string]float64{}
	for t, n := range after {
		d := n - before[t]
		if d < 0 {
			return Cost{}, fmt.Errorf("%s{type=%q} fell from %g to %g (istiod restarted?)", measure.MetricXDSPushes, t, before[t], n)
		}
		if d > 0 {
			c.ByType[t] = d / secs
			c.PushesPerSecond += d / secs
		}
	}
	return c, nil
}

// PushesByType reads pilot_xds_pushes by its type label, without the *_senderr types.
func PushesByType(m *measure.Metrics) map[string]float64 {
	out := map[string]float64{}
	f := m.Families[measure.MetricXDSPushes]
	if f == nil {
		return out
	}
	for _, s := range f.GetMetric() {
		var typ string
		for _, l := range s.GetLabel() {
			if l.GetName() == measure.LabelType {
				typ = l.GetValue()
			}
		}
		if strings.HasSuffix(typ, "_senderr") {
			continue
		}
		var v float64
		switch {
		case s.Counter != nil:
			v = s.GetCounter().GetValue()
		case s.Gauge != nil:
			v = s.GetGauge().GetValue()
		case s.Untyped != nil:
			v = s.GetUntyped().GetValue()
		}
		out[typ] += v
	}
	return out
}
