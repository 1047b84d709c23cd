package markdown

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
)

func checks(b *bytes.Buffer, cs []report.IstiodCheck) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(b, "## istiod property checks\n\n| Check | Result | Reference | Detail |\n|---|---|---|---|\n")
	for _, c := range cs {
		detail := c.Detail
		if len(c.Profiles) > 0 {
			detail += " Profiles: " + strings.Join(c.Profiles, ", ") + "."
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(c.Name), c.Result, cell(c.Reference), cell(strings.ReplaceAll(detail, "\n", " ")))
	}
	b.WriteString("\n")
	for _, c := range cs {
		if r := c.Rotation; r != nil && len(r.Points) > 0 {
			fmt.Fprintf(b, "### %s\n\n| Rotations | Mode | Live heap MB | Goroutines |\n|---|---|---|---|\n", cell(c.Name))
			for _, p := range r.Points {
				fmt.Fprintf(b, "| %d | %s | %s | %s |\n", p.Rotations, cell(p.Mode), num(p.LiveHeapBytes/bytesPerMB, 2), num(p.Goroutines, 0))
			}
			fmt.Fprintf(b, "\nPer rotation: live heap %s KB (bound %s KB), goroutines %s (bound %s).\n\n",
				slope(r.LiveHeapSlopeBytes, r.LiveHeapSlopeStdErr, 1e3, 1), opt(r.LiveHeapBoundBytes, 1e3, 1),
				slope(r.GoroutineSlope, r.GoroutineSlopeStdErr, 1, 2), opt(r.GoroutineBound, 1, 2))
		}
	}
}

// controls is the table of the checks' control runs: each with a fault injected or kept away,
// and whether the check said what it must have.
func controls(b *bytes.Buffer, cs []report.IstiodCheckControl) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(b, "## Controls of the istiod checks\n\nEach check run once with a fault injected (it must fail) and once with the fault kept away (it must pass), before any known-issue table.\n\n"+
		"| Check | Expect | Fault | Outcome | Verdict | Detail |\n|---|---|---|---|---|---|\n")
	for _, c := range cs {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", cell(c.Check), c.Expect, cell(c.Fault), c.Outcome, c.Verdict, cell(strings.ReplaceAll(c.Detail, "\n", " ")))
	}
	b.WriteString("\n")
}

// Gates is the report.md section on gates alone (make compare's FAIL_ON uses it).
func Gates(gs []report.Gate) []byte {
	var b bytes.Buffer
	gates(&b, gs)
	return b.Bytes()
}

func gates(b *bytes.Buffer, gs []report.Gate) {
	if len(gs) == 0 {
		return
	}
	broken := 0
	for _, g := range gs {
		if g.Verdict != report.GatePass {
			broken++
		}
	}
	fmt.Fprintf(b, "## Gates\n\n%d of %d broken.\n\n| Path | Bound | Value | Verdict | Reason | Profiles |\n|---|---|---|---|---|---|\n", broken, len(gs))
	for _, g := range gs {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", cell(g.Path), cell(g.Bound), cell(gateValues(g)), g.Verdict, cell(g.Reason), cell(strings.Join(g.Profiles, ", ")))
	}
	b.WriteString("\n")
}

// gateValues prints a gate's values compactly for the table.
func gateValues(g report.Gate) string {
	if bl := g.Baseline; bl != nil {
		change := missingCellValue
		if bl.Change != nil {
			change = fmt.Sprintf("%+.1f%%", 100**bl.Change)
		}
		return fmt.Sprintf("%.4g vs %.4g (%s, p=%.3f, n=%d+%d)", bl.Median, bl.BaseMedian, change, bl.P, bl.N, bl.BaseN)
	}
	var parts []string
	for _, v := range g.Values {
		s := missingCellValue
		switch {
		case v.Number != nil:
			s = fmt.Sprintf("%.4g", *v.Number)
		case v.Text != nil:
			s = *v.Text
		}
		if len(g.Values) > 1 {
			s = v.Path + " " + s
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "not measured"
	}
	return strings.Join(parts, "; ")
}

func profiles(b *bytes.Buffer, ps []report.Profile) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(b, "## istiod profiles\n\n`go tool pprof -http=: FILE`; two heap profiles side by side: `go tool pprof -diff_base=BASE FILE`. "+
		"They cost this run %.2f s of wall time (taking the heap and goroutine profiles, and waiting for CPU profiles to end; -profiles=false turns them off).\n\n"+
		"| istiod | Kind | When | File | Seconds | Waited s |\n|---|---|---|---|---|---|\n", analysis.ProfilesCost(ps))
	for _, p := range ps {
		waited := missingCellValue
		if p.WaitedSeconds != nil {
			waited = num(*p.WaitedSeconds, 2)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", cell(p.Istiod), p.Kind, cell(p.When), cell(p.File), num(p.Seconds, 2), waited)
	}
	b.WriteString("\n")
}
