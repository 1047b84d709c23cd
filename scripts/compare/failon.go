package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ambientmc/ambientmc/framework/ci/baseline"
	"github.com/ambientmc/ambientmc/framework/ci/gates"
	"github.com/ambientmc/ambientmc/framework/ci/junit"
	"github.com/ambientmc/ambientmc/framework/report"
	reportmd "github.com/ambientmc/ambientmc/framework/report/markdown"
)

// failOn is FAIL_ON: what may regress from A (the base) to B (the change), and at which alpha.
type failOn struct {
	bounds []baseline.Bound
	alpha  float64
}

// parseFailOn reads FAIL_ON, a list (Join/perRemote:live-heap-B+10%,...) or a gates file (its
// baseline: section), and checks that the rounds can reach significance at all, before anything
// is built or run.
func parseFailOn(s string, rounds int) (*failOn, error) {
	if s == "" {
		return nil, nil
	}
	f := &failOn{alpha: 0.05}
	if strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml") {
		g, err := gates.Load(s)
		if err != nil {
			return nil, fmt.Errorf("FAIL_ON=%s: %w", s, err)
		}
		if len(g.Baseline) == 0 {
			return nil, fmt.Errorf("FAIL_ON=%s has no baseline: section: add one saying which benchmarks may regress by how much", s)
		}
		f.bounds, f.alpha = g.Baseline, g.Alpha
	} else {
		var err error
		if f.bounds, err = baseline.ParseFailOn(s); err != nil {
			return nil, err
		}
	}
	if p := baseline.MinP(rounds, rounds); p > f.alpha {
		return nil, fmt.Errorf("FAIL_ON with ROUNDS=%d: benchstat's U test cannot call a difference of %d+%d samples significant (p >= %.3g > alpha %g); use ROUNDS=%d or more",
			rounds, rounds, rounds, p, f.alpha, minRounds(f.alpha))
	}
	return f, nil
}

func minRounds(alpha float64) int {
	n := 1
	for baseline.MinP(n, n) > alpha && n < 100 {
		n++
	}
	return n
}

// judge compares B's bench lines with A's, prints one line per gate, writes junit.xml for a
// PR-versus-base job, and returns the gates and how many broke.
func (f *failOn) judge(out, aBench, bBench string) ([]report.Gate, int, error) {
	base, _, err := baseline.Read(aBench)
	if err != nil {
		return nil, 0, err
	}
	cur, _, err := baseline.Read(bBench)
	if err != nil {
		return nil, 0, err
	}
	gs := baseline.Judge(base, cur, f.bounds, f.alpha)
	b := junit.NewBuilder("github.com/ambientmc/ambientmc/scripts/compare")
	broken := 0
	for _, g := range gs {
		fmt.Println("compare:", g.Message)
		failed := g.Verdict != report.GatePass
		if failed {
			broken++
		}
		name := "TestGates/" + g.Path
		if g.Baseline != nil {
			name += "/" + g.Baseline.Benchmark
		}
		b.AddCase(junit.Case{Name: name, Failed: failed, Message: g.Message, Log: g.Message + "\n"})
	}
	host, _ := os.Hostname()
	return gs, broken, junit.Write(filepath.Join(out, "junit.xml"), b.Suites(0, host))
}

// gatesMarkdown is compare.md's section on FAIL_ON.
func gatesMarkdown(gs []report.Gate) []byte {
	return append([]byte("\n(FAIL_ON: B, the change, against A, the base.)\n\n"), reportmd.Gates(gs)...)
}
