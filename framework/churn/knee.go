package churn

import (
	"maps"
	"slices"
	"time"

	"github.com/ambientmc/ambientmc/framework/report"
)

// Knees finds, per case, mode and window size, the lowest rate whose p50 is over twice the p50 at
// the lowest rate (Knee).
func Knees(runs []report.ChurnRun) []report.ChurnKnee {
	type group struct {
		where, mode string
		pct         float64
	}
	p50s := map[group]map[float64]time.Duration{}
	var order []group
	for _, r := range runs {
		if r.P50Ms == nil {
			continue
		}
		g := group{r.Where, r.Mode, -1}
		if r.PercentOfPods != nil {
			g.pct = *r.PercentOfPods
		}
		if p50s[g] == nil {
			p50s[g] = map[float64]time.Duration{}
			order = append(order, g)
		}
		p50s[g][r.RatePodsPerSecond] = time.Duration(*r.P50Ms * float64(time.Millisecond))
	}
	var out []report.ChurnKnee
	for _, g := range order {
		if len(p50s[g]) < 2 {
			continue
		}
		base := slices.Min(slices.Collect(maps.Keys(p50s[g])))
		k := report.ChurnKnee{Where: g.where, Mode: g.mode, BaseRate: base, BaseP50Ms: ms(p50s[g][base])}
		if g.pct >= 0 {
			k.PercentOfPods = report.F(g.pct)
		}
		if rate, ok := Knee(p50s[g]); ok {
			k.RatePodsPerSecond = report.F(rate)
		}
		out = append(out, k)
	}
	return out
}
