package multicluster

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/churn"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Every window of the sweep plus its drain and samples, after a fresh istiod and every join;
// trimmed to one rate in half as long windows when the plan does not fit.
var _ = planned.Add("TestChurn", nil, func(in experiment.PlanIn) plan.Item {
	c := &in.O.Churn
	fixed := in.Restart + 1 + float64(in.Remotes)*0.9 + 2 // fresh istiod, watcher, every join, the finding
	length := func(ch expctx.Churn) float64 {
		windows := ch.Windows(in.Remotes > 0)
		per := ch.Duration.Seconds() + 1.6
		if len(ch.Percents) > 0 {
			per = 0
			for _, p := range ch.Percents {
				per += p / 100 * in.Pods / ch.Rates[0]
			}
			per = per/float64(len(ch.Percents)) + 1.2
		}
		return fixed + float64(windows)*per
	}
	detail := func(ch expctx.Churn) string {
		return fmt.Sprintf("%d windows of %s (rates %s pods/s)", ch.Windows(in.Remotes > 0), ch.Duration, expctx.JoinFloats(ch.Rates))
	}
	it := plan.Item{Expected: experiment.S(length(*c)), Detail: detail(*c)}
	if len(c.Rates) > 1 || c.Duration > 5*time.Second {
		it.Trim = func() (plan.Item, string) {
			full := *c
			c.Rates, c.Duration = c.Rates[len(c.Rates)-1:], max(5*time.Second, c.Duration/2)
			return plan.Item{Name: "TestChurn", Expected: experiment.S(length(*c)), Detail: detail(*c)},
				fmt.Sprintf("TestChurn trimmed to fit -timeout: rates %s pods/s in %s windows instead of -churn.rates=%s -churn.duration=%s; raise -timeout for the full sweep (make e2e runs it)",
					expctx.JoinFloats(c.Rates), c.Duration, expctx.JoinFloats(full.Rates), full.Duration)
		}
	}
	return it
})

// TestChurn measures how fast endpoint changes reach a ztunnel-like client of the observed istiod
// and what the churn costs that istiod: with every cluster joined, pods change at each rate of
// -churn.rates in the observed cluster, in one remote cluster, then in all remote clusters at once
// (the rate shared among them, so the work is the same at any cluster count). It first checks what
// the client sees when remote endpoints turn unready (a finding: experiment.StartChurn).
func TestChurn(t *testing.T) {
	ctx := mc.Begin(t)
	cf := mc.Opts.Churn
	ch := mc.StartChurn(t, ctx)
	for _, where := range cf.Cases {
		targets, names, ok := ch.Targets(t, where)
		if !ok {
			continue
		}
		for _, mode := range cf.Modes {
			if mode == churn.Ready && where != report.ChurnLocal {
				continue // remote readiness is the finding, not a latency
			}
			for _, rate := range cf.Rates {
				for _, pct := range experiment.PercentsOrNone(cf.Percents) {
					name := fmt.Sprintf("where=%s/mode=%s/rate=%s", where, mode, strconv.FormatFloat(rate, 'f', -1, 64))
					if pct != nil {
						name += "/percent=" + strconv.FormatFloat(*pct, 'f', -1, 64)
					}
					t.Run(name, func(t *testing.T) {
						ch.Window(t, ctx, churn.Spec{Where: where, Mode: mode, Rate: rate, Percent: pct, Clusters: names, Length: cf.Duration}, targets)
					})
				}
			}
		}
	}
	ch.Knees()
}
