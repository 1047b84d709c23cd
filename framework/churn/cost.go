package churn

import (
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Cost is what istiod spent over a churn window.
type Cost struct {
	// CPUCores is the average CPU use; ResolutionCores is the CPU source's step over the window,
	// below which a reading means "less than this", not a value. CPUSource names the source.
	CPUCores, ResolutionCores float64
	CPUSource                 string
	// PushesPerSecond sums pilot_xds_pushes over types (send errors excluded); ByType splits it
	// ("wds", ...). istiod counts one push per connected client. Nil when istiod exported no
	// pilot_xds_pushes at the end of the window.
	PushesPerSecond *float64
	ByType          map[string]float64
	// ConnectedXDS is the pilot_xds gauge at the end of the window (nil: not exported).
	ConnectedXDS *float64
	// CSRs are istiod's CA counters over the window: the certificates asked for the pods the
	// churn brought (where something serves them: cluster.FakeNodeProxies).
	CSRs    report.IstiodCSRs
	Seconds float64
}

// CostBetween computes istiod's cost from CPU readings and metric scrapes taken at the start and
// the end of a window.
func CostBetween(cpuA, cpuB measure.CPUReading, a, b *measure.Metrics) (Cost, error) {
	span, err := measure.SpanBetween(cpuA, cpuB)
	if err != nil {
		return Cost{}, err
	}
	c := Cost{CPUCores: span.Cores(), ResolutionCores: span.CoresResolution(), CPUSource: cpuB.Source,
		Seconds: span.WallSeconds, ConnectedXDS: b.ConnectedXDS,
		CSRs: report.IstiodCSRs{Received: b.CSRs - a.CSRs, Issued: b.CertsIssued - a.CertsIssued}}
	if c.CSRs.Received < 0 || c.CSRs.Issued < 0 {
		return Cost{}, fmt.Errorf("%s fell from %g to %g (istiod restarted?)", measure.MetricCSRs, a.CSRs, b.CSRs)
	}
	if b.Families[measure.MetricXDSPushes] == nil {
		return c, nil
	}
	secs := b.At.Sub(a.At).Seconds()
	if secs <= 0 {
		return Cost{}, fmt.Errorf("metric window ends at %s, not after its start %s", b.At, a.At)
	}
	before, after := PushesByType(a), PushesByType(b)
	c.ByType = map[string]float64{}
	total := 0.0
	for t, n := range after {
		d := n - before[t]
		if d < 0 {
			return Cost{}, fmt.Errorf("%s{type=%q} fell from %g to %g (istiod restarted?)", measure.MetricXDSPushes, t, before[t], n)
		}
		if d > 0 {
			c.ByType[t] = d / secs
			total += d / secs
		}
	}
	c.PushesPerSecond = &total
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
