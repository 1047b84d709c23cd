package main

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
)

// figure is one row of the Markdown table: how to read it from a report and how to print it.
type figure struct {
	name  string
	unit  string  // as printed
	scale float64 // value / scale is printed
	read  func(*report.Report) (float64, bool)
}

func perRemote(get func(*report.PerRemote) *float64) func(*report.Report) (float64, bool) {
	return func(r *report.Report) (float64, bool) {
		if r.ControlPlane == nil || r.ControlPlane.PerRemoteCluster == nil {
			return 0, false
		}
		return deref(get(r.ControlPlane.PerRemoteCluster))
	}
}

func deref(v *float64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return *v, true
}

// meanOver reads the mean of a figure over one of the control plane's lists (its joins, its
// leaves); absent when none measured it.
func meanOver[T any](list func(*report.ControlPlane) []T, get func(T) *float64) func(*report.Report) (float64, bool) {
	return func(r *report.Report) (float64, bool) {
		if r.ControlPlane == nil {
			return 0, false
		}
		var sum float64
		n := 0
		for _, item := range list(r.ControlPlane) {
			if v := get(item); v != nil {
				sum += *v
				n++
			}
		}
		return sum / float64(n), n > 0
	}
}

// returned reads a figure of the memory istiod returned after the leaves.
func returned(get func(*analysis.Returned) *float64) func(*report.Report) (float64, bool) {
	return func(r *report.Report) (float64, bool) {
		if ret := analysis.MemoryReturned(r.ControlPlane); ret != nil {
			return deref(get(ret))
		}
		return 0, false
	}
}

var figures = []figure{
	{"RSS per remote cluster", "MB", 1e6, perRemote(func(p *report.PerRemote) *float64 { return p.RSSBytes.ValueOf() })},
	{"Heap in use per remote cluster", "MB", 1e6, perRemote(func(p *report.PerRemote) *float64 { return p.HeapInuseBytes.ValueOf() })},
	{"Live heap per remote cluster", "MB", 1e6, perRemote(func(p *report.PerRemote) *float64 { return p.LiveHeapBytes.ValueOf() })},
	{"Join CPU per remote cluster", "CPU-s", 1, perRemote(func(p *report.PerRemote) *float64 { return p.JoinCPUSeconds.ValueOf() })},
	{"Convergence (mean over joins)", "s", 1, meanOver(func(cp *report.ControlPlane) []report.Join { return cp.Joins },
		func(j report.Join) *float64 { return j.ConvergenceSeconds })},
	{"Leave time (mean over leaves)", "s", 1, meanOver(func(cp *report.ControlPlane) []report.Leave { return cp.Leaves },
		func(l report.Leave) *float64 { return l.Seconds })},
	{"Live heap returned after leaving", "MB", 1e6, returned(func(ret *analysis.Returned) *float64 { return ret.LiveHeapBytes })},
	{"Live heap kept after leaving", "MB", 1e6, returned(func(ret *analysis.Returned) *float64 { return ret.LeftoverLiveHeap })},
	{"RSS returned after leaving", "MB", 1e6, returned(func(ret *analysis.Returned) *float64 { return ret.RSSBytes })},
}

// latencyFigures adds a row per latency run kind that either side measured.
func latencyFigures(reports [][]*report.Report) []figure {
	type key struct{ path, conn string }
	var keys []key
	for _, rs := range reports {
		for _, r := range rs {
			if r.Latency == nil {
				continue
			}
			for _, run := range r.Latency.Runs {
				if k := (key{run.Path, run.Connections}); !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
	}
	var out []figure
	for _, k := range keys {
		for _, q := range []struct {
			name string
			get  func(report.LatencyRun) float64
		}{{"avg", func(r report.LatencyRun) float64 { return r.AvgMs }}, {"p99", func(r report.LatencyRun) float64 { return r.P99Ms }}} {
			out = append(out, figure{fmt.Sprintf("Latency %s, %s connections, %s", k.path, k.conn, q.name), "ms", 1,
				func(r *report.Report) (float64, bool) {
					if r.Latency == nil {
						return 0, false
					}
					for _, run := range r.Latency.Runs {
						if run.Path == k.path && run.Connections == k.conn {
							return q.get(run), true
						}
					}
					return 0, false
				}})
		}
	}
	return out
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cellOf prints the median of the measured rounds with their range and count; "-" when none.
func cellOf(vs []float64, f figure) string {
	if len(vs) == 0 {
		return "-"
	}
	p := func(v float64) string { return trim(v / f.scale) }
	return fmt.Sprintf("%s (%s … %s, n=%d)", p(median(vs)), p(slices.Min(vs)), p(slices.Max(vs)), len(vs))
}

func trim(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func markdown(sides []*side, rounds int, suiteFlags []string) ([]byte, error) {
	reports := make([][]*report.Report, len(sides))
	for i, s := range sides {
		for _, d := range s.Dirs {
			r, err := report.Read(filepath.Join(d, report.JSONFile))
			if err != nil {
				return nil, err
			}
			reports[i] = append(reports[i], r)
		}
	}
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# istiod A/B comparison\n\n%d rounds, alternating A, B; suite flags: `%s`.\n\n", rounds, strings.Join(suiteFlags, " "))
	p("| | istiod | sha256 | version output |\n|---|---|---|---|\n")
	for _, s := range sides {
		what := s.Build.ModuleVersion
		if s.Spec.Binary != "" {
			what = s.Build.Path
		}
		if len(s.Build.ReplacedPins) > 0 {
			what += " (replaced pins: " + strings.Join(s.Build.ReplacedPins, "; ") + ")"
		}
		p("| %s | %s | %s | `%s` |\n", s.Label, what, s.Build.SHA256[:12], s.Build.VersionOutput)
	}
	p("\nMedian over the rounds (range, rounds that measured it); Δ is B's median against A's. MB = 10^6 bytes.\n\n")
	p("| Figure | Unit | A | B | Δ |\n|---|---|---|---|---|\n")
	for _, f := range append(slices.Clone(figures), latencyFigures(reports)...) {
		vals := make([][]float64, len(sides))
		for i := range sides {
			for _, r := range reports[i] {
				if v, ok := f.read(r); ok && !math.IsNaN(v) {
					vals[i] = append(vals[i], v)
				}
			}
		}
		if len(vals[0]) == 0 && len(vals[1]) == 0 {
			continue // not measured by this experiment
		}
		delta := "-"
		if len(vals[0]) > 0 && len(vals[1]) > 0 {
			ma, mb := median(vals[0]), median(vals[1])
			delta = trim((mb-ma)/f.scale) + " " + f.unit
			if ma != 0 {
				delta += fmt.Sprintf(" (%+.0f%%)", 100*(mb-ma)/math.Abs(ma))
			}
		}
		p("| %s | %s | %s | %s | %s |\n", f.name, f.unit, cellOf(vals[0], f), cellOf(vals[1], f), delta)
	}
	p("\nbenchstat's comparison of the bench lines: benchstat.txt.\n")
	return b.Bytes(), nil
}
