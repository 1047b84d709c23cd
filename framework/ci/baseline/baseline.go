// Package baseline compares a run's benchmark lines (bench.txt) with an earlier run's, as
// benchstat does: medians, and the Mann-Whitney U test of golang.org/x/perf/benchmath at the
// version of the benchstat make compare runs (Benchstat). A bound fails only when the change is
// beyond it in the regressing direction and benchstat would call the difference significant.
package baseline

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Benchstat is the benchstat command make compare runs. Its module version is the golang.org/x/perf
// that go.mod pins for the benchmath this package judges with, so the table and the verdict agree
// (a test checks it).
const Benchstat = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

// Bound limits how far one benchmark unit may move from its baseline.
type Bound struct {
	Selector Selector
	// MaxIncrease and MaxDecrease are relative (0.1 is 10%) changes of the median.
	MaxIncrease, MaxDecrease *float64
	Reason                   string
}

// String is the bound as gate lines print it, e.g. "+10% at most".
func (b Bound) String() string {
	var parts []string
	if b.MaxIncrease != nil {
		parts = append(parts, "at most +"+pct(*b.MaxIncrease))
	}
	if b.MaxDecrease != nil {
		parts = append(parts, "at most -"+pct(*b.MaxDecrease))
	}
	return strings.Join(parts, ", ") + " vs baseline"
}

func pct(x float64) string { return strconv.FormatFloat(100*x, 'g', -1, 64) + "%" }

// Selector picks benchmark lines by base name, some of their name parts, and a unit:
// "Join/perRemote:live-heap-B" matches "BenchmarkJoin/clusters=3/.../perRemote" lines' live-heap-B
// values. Each full name it matches is compared on its own: the baseline must have run the same
// configuration (the name carries clusters, scale, istiods).
type Selector struct {
	Base  string
	Parts []string // without the leading "/"
	Unit  string
}

func (s Selector) String() string {
	return strings.Join(append([]string{s.Base}, s.Parts...), "/") + ":" + s.Unit
}

// Benchmarks are the base names bench.Render writes (framework/report/bench).
var Benchmarks = []string{"Setup", "Join", "Leave", "Latency", "Churn"}

// ParseSelector reads "Base/part/...:unit".
func ParseSelector(s string) (Selector, error) {
	name, unit, ok := cutLast(s, ":")
	if !ok || unit == "" || strings.ContainsAny(unit, " \t") {
		return Selector{}, fmt.Errorf("%q: a benchmark selector is NAME:UNIT, e.g. Join/perRemote:live-heap-B", s)
	}
	name = strings.TrimPrefix(name, "Benchmark")
	parts := strings.Split(name, "/")
	if !slices.Contains(Benchmarks, parts[0]) {
		return Selector{}, fmt.Errorf("%q: no benchmark %q in bench.txt; the benchmarks are %s", s, parts[0], strings.Join(Benchmarks, ", "))
	}
	for _, p := range parts[1:] {
		if p == "" {
			return Selector{}, fmt.Errorf("%q: empty name part", s)
		}
	}
	return Selector{Base: parts[0], Parts: parts[1:], Unit: unit}, nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// ParseRelative reads a relative bound written as a percentage, e.g. "10%".
func ParseRelative(s string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	x, err := strconv.ParseFloat(num, 64)
	// ParseFloat reads NaN and Inf too: no change is beyond either, so such a bound never fails.
	if !ok || err != nil || x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%q: write the bound as a percentage, e.g. 10%%", s)
	}
	return x / 100, nil
}

// ParseFailOn reads make compare's FAIL_ON: comma-separated SELECTOR+PCT (may not rise by more
// than PCT) or SELECTOR-PCT (may not fall by more), e.g.
// "Join/perRemote:live-heap-B+10%,Latency/path=cross-cluster/conn=new:avg-ms+20%".
func ParseFailOn(s string) ([]Bound, error) {
	var out []Bound
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexAny(item, "+-")
		if i < 0 || !strings.HasSuffix(item, "%") {
			return nil, fmt.Errorf("FAIL_ON %q: write NAME:UNIT+PCT%% or NAME:UNIT-PCT%%, e.g. Join/perRemote:live-heap-B+10%%", item)
		}
		sel, err := ParseSelector(item[:i])
		if err != nil {
			return nil, fmt.Errorf("FAIL_ON: %w", err)
		}
		x, err := ParseRelative(item[i+1:])
		if err != nil {
			return nil, fmt.Errorf("FAIL_ON %q: %w", item, err)
		}
		b := Bound{Selector: sel}
		if item[i] == '+' {
			b.MaxIncrease = &x
		} else {
			b.MaxDecrease = &x
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("FAIL_ON is empty: name at least one NAME:UNIT+PCT%")
	}
	return out, nil
}
