package baseline

import (
	"fmt"
	"math"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/ambientmc/ambientmc/framework/report"
)

// MinP is the smallest p-value benchstat's U test can give two samples of n1 and n2 values: two
// samples that do not overlap at all.
func MinP(n1, n2 int) float64 {
	if n1 < 1 || n2 < 1 {
		return 1
	}
	a, b := make([]float64, n1), make([]float64, n2)
	for i := range a {
		a[i] = float64(i)
	}
	for i := range b {
		b[i] = float64(n1 + i)
	}
	return compare(a, b, 0.05).P
}

func compare(base, cur []float64, alpha float64) benchmath.Comparison {
	th := &benchmath.Thresholds{CompareAlpha: alpha}
	return benchmath.AssumeNothing.Compare(benchmath.NewSample(base, th), benchmath.NewSample(cur, th))
}

func median(vs []float64) float64 {
	th := benchmath.DefaultThresholds
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(vs, &th), 0.95).Center
}

// Check says, before anything runs, whether b can be judged against base at alpha when the
// run being judged brings n values of each benchmark: the baseline must hold what b selects, and
// the U test must be able to reach alpha with those sample sizes at all.
func Check(base Samples, b Bound, n int, alpha float64) error {
	keys := base.Match(b.Selector)
	if len(keys) == 0 {
		names := base.names(b.Selector.Base)
		if len(names) == 0 {
			return fmt.Errorf("%s: the baseline has no Benchmark%s lines", b.Selector, b.Selector.Base)
		}
		return fmt.Errorf("%s: no baseline line matches it with unit %s; the baseline's Benchmark%s names are %s",
			b.Selector, b.Selector.Unit, b.Selector.Base, strings.Join(names, ", "))
	}
	for _, k := range keys {
		nb := len(base[k])
		if p := MinP(nb, n); p > alpha {
			return fmt.Errorf("%s: the baseline has %d values of Benchmark%s and this comparison brings %d: "+
				"benchstat's U test cannot call any difference significant (p >= %.3g > alpha %g); %s",
				b.Selector, nb, k.Name, n, p, alpha, neededSamples(n, alpha))
		}
	}
	return nil
}

// neededSamples says how many baseline values a comparison bringing n values needs at alpha.
func neededSamples(n int, alpha float64) string {
	for nb := 1; nb <= 200; nb++ {
		if MinP(nb, n) <= alpha {
			if n == 1 {
				return fmt.Sprintf("one run against a baseline needs %d baseline runs at alpha %g; "+
					"compare several rounds instead (make compare ROUNDS=4 FAIL_ON=...), or raise the alpha", nb, alpha)
			}
			return fmt.Sprintf("give at least %d baseline values, or more rounds", nb)
		}
	}
	return "raise the alpha"
}

// Judge compares cur with base for every bound and returns one gate per benchmark name each
// bound selects in cur.
func Judge(base, cur Samples, bounds []Bound, alpha float64) []report.Gate {
	var out []report.Gate
	for _, b := range bounds {
		keys := cur.Match(b.Selector)
		if len(keys) == 0 {
			out = append(out, report.Gate{Path: b.Selector.String(), Bound: b.String(), Reason: b.Reason, Verdict: report.GateNotMeasured,
				Message: fmt.Sprintf("gate FAIL %s: not measured: this run wrote no such bench line, bound %s", b.Selector, b)})
			continue
		}
		for _, k := range keys {
			out = append(out, judgeOne(b, k, base[k], cur[k], alpha))
		}
	}
	return out
}

func judgeOne(b Bound, k Key, base, cur []float64, alpha float64) report.Gate {
	g := report.Gate{Path: b.Selector.String(), Bound: b.String(), Reason: b.Reason}
	name := "Benchmark" + k.Name
	if len(base) == 0 {
		g.Verdict = report.GateNotMeasured
		g.Message = fmt.Sprintf("gate FAIL %s: not measured: the baseline has no %s %s (it ran another configuration)", b.Selector, name, k.Unit)
		return g
	}
	c := compare(base, cur, alpha)
	bl := &report.GateBaseline{Benchmark: name, Unit: k.Unit, BaseMedian: median(base), Median: median(cur),
		P: c.P, Alpha: alpha, BaseN: len(base), N: len(cur)}
	change := math.Inf(int(math.Copysign(1, bl.Median-bl.BaseMedian)))
	if bl.BaseMedian != 0 {
		change = bl.Median/bl.BaseMedian - 1
		bl.Change = &change
	} else if bl.Median == 0 {
		change = 0
		bl.Change = &change
	}
	g.Baseline = bl
	significant := !(c.P > alpha) // benchstat's rule (benchmath.Comparison.FormatDelta)
	beyond := b.MaxIncrease != nil && change > *b.MaxIncrease || b.MaxDecrease != nil && -change > *b.MaxDecrease
	what := fmt.Sprintf("%s %s: median %.4g vs baseline %.4g (%s, %s, alpha %g)", name, k.Unit, bl.Median, bl.BaseMedian, signedPct(change), c, alpha)
	switch {
	case beyond && significant:
		g.Verdict = report.GateFail
		g.Message = fmt.Sprintf("gate FAIL %s: %s breaks %s", b.Selector, what, b)
	case beyond:
		g.Verdict = report.GatePass
		g.Message = fmt.Sprintf("gate pass %s: %s: beyond %s but not significant", b.Selector, what, b)
	default:
		g.Verdict = report.GatePass
		g.Message = fmt.Sprintf("gate pass %s: %s, within %s", b.Selector, what, b)
	}
	return g
}

func signedPct(x float64) string {
	if math.IsInf(x, 0) {
		return fmt.Sprintf("%cInf%%", "-+"[btoi(x > 0)])
	}
	return fmt.Sprintf("%+.1f%%", 100*x)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
