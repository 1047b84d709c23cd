package baseline

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/bench"
)

const header = "goos: linux\ngoarch: amd64\npkg: github.com/ambientmc/ambientmc/suites/multicluster\nprovider: local\n"

// benchLines writes one run's bench lines: the per-remote live heap and join CPU.
func benchLines(liveHeap, joinCPU float64) string {
	return header + fmt.Sprintf("BenchmarkJoin/clusters=3/services=20/pods=100/istiods=all/perRemote 1 %g live-heap-B %g join-cpu-s\n", liveHeap, joinCPU) +
		fmt.Sprintf("BenchmarkJoin/clusters=3/services=20/pods=100/istiods=all/join=1 1 %g live-heap-B\n", liveHeap*10)
}

func samples(t *testing.T, runs ...string) Samples {
	t.Helper()
	s := Samples{}
	for i, r := range runs {
		if err := s.ReadBench(fmt.Sprintf("run-%d", i), []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestSelectors(t *testing.T) {
	s, err := ParseSelector("BenchmarkJoin/perRemote:live-heap-B")
	if err != nil || s.Base != "Join" || len(s.Parts) != 1 || s.Parts[0] != "perRemote" || s.Unit != "live-heap-B" {
		t.Fatalf("%+v %v", s, err)
	}
	bs, err := ParseFailOn("Join/perRemote:live-heap-B+10%, Latency/path=cross-cluster/conn=new:avg-ms-5%")
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || *bs[0].MaxIncrease != 0.1 || bs[0].MaxDecrease != nil || bs[1].Selector.Unit != "avg-ms" || *bs[1].MaxDecrease != 0.05 {
		t.Fatalf("%+v", bs)
	}
	if got := bs[0].String(); got != "at most +10% vs baseline" {
		t.Errorf("String: %q", got)
	}
	for in, want := range map[string]string{
		"":                                "FAIL_ON is empty",
		"Join/perRemote:live-heap-B":      "write NAME:UNIT+PCT% or NAME:UNIT-PCT%",
		"Join/perRemote+10%":              "a benchmark selector is NAME:UNIT",
		"Joins/perRemote:live-heap-B+1%":  `no benchmark "Joins"`,
		"Join//x:u+1%":                    "empty name part",
		"Join/perRemote:live-heap-B+NaN%": `"NaN%": write the bound as a percentage`,
		"Join/perRemote:live-heap-B+Inf%": `"Inf%": write the bound as a percentage`,
	} {
		if _, err := ParseFailOn(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("FAIL_ON %q: got %v, want %q", in, err, want)
		}
	}
}

func TestMatch(t *testing.T) {
	s := samples(t, benchLines(3e6, 0.07))
	keys := s.Match(Selector{Base: "Join", Parts: []string{"perRemote"}, Unit: "live-heap-B"})
	if len(keys) != 1 || keys[0].Name != "Join/clusters=3/services=20/pods=100/istiods=all/perRemote" {
		t.Fatalf("%+v", keys)
	}
	if k := s.Match(Selector{Base: "Join", Unit: "live-heap-B"}); len(k) != 2 {
		t.Errorf("no parts matches every Join line with the unit: %+v", k)
	}
	if k := s.Match(Selector{Base: "Join", Parts: []string{"perRemote"}, Unit: "rss-B"}); len(k) != 0 {
		t.Errorf("unit must match: %+v", k)
	}
}

// MinP agrees with the table benchmath itself keeps for equal sample sizes, and gives the
// asymmetric case of one run against n: 2/(n+1).
func TestMinP(t *testing.T) {
	for n, want := range map[int]float64{3: 0.1, 4: 0.02857142857142857, 5: 0.007936507936507936} {
		if got := MinP(n, n); math.Abs(got-want) > 1e-12 {
			t.Errorf("MinP(%d,%d) = %g, want %g", n, n, got, want)
		}
	}
	if got := MinP(39, 1); math.Abs(got-0.05) > 1e-9 {
		t.Errorf("MinP(39,1) = %g, want 2/40", got)
	}
}

func TestCheckBeforeStart(t *testing.T) {
	b := Bound{Selector: Selector{Base: "Join", Parts: []string{"perRemote"}, Unit: "live-heap-B"}, MaxIncrease: ptr(0.1)}
	three := samples(t, benchLines(3e6, 0.07), benchLines(3.1e6, 0.07), benchLines(2.9e6, 0.07))
	err := Check(three, b, 1, 0.05)
	if err == nil || !strings.Contains(err.Error(), "the baseline has 3 values of BenchmarkJoin/clusters=3/services=20/pods=100/istiods=all/perRemote and this comparison brings 1") ||
		!strings.Contains(err.Error(), "one run against a baseline needs 39 baseline runs at alpha 0.05") {
		t.Errorf("1 vs 3: %v", err)
	}
	if err := Check(three, b, 4, 0.05); err == nil || !strings.Contains(err.Error(), "give at least 4 baseline values") {
		t.Errorf("4 vs 3: %v", err)
	}
	if err := Check(three, b, 3, 0.2); err != nil {
		t.Errorf("3 vs 3 at alpha 0.2 can reach p=0.1: %v", err)
	}
	other := b
	other.Selector.Unit = "rss-B"
	if err := Check(three, other, 5, 0.05); err == nil || !strings.Contains(err.Error(), "no baseline line matches it with unit rss-B; the baseline's BenchmarkJoin names are Join/clusters=3/services=20/pods=100/istiods=all/join=1, Join/clusters=3") {
		t.Errorf("unit the baseline lacks: %v", err)
	}
	leave := Bound{Selector: Selector{Base: "Leave", Unit: "leave-s"}}
	if err := Check(three, leave, 5, 0.05); err == nil || !strings.Contains(err.Error(), "the baseline has no BenchmarkLeave lines") {
		t.Errorf("benchmark the baseline lacks: %v", err)
	}
}

func ptr(v float64) *float64 { return &v }

func TestJudge(t *testing.T) {
	var base, up30, up5 []string
	for i := range 5 {
		d := float64(i) * 0.01e6
		base = append(base, benchLines(3e6+d, 0.07))
		up30 = append(up30, benchLines(3.9e6+d, 0.07))
		up5 = append(up5, benchLines(3.15e6+d, 0.07))
	}
	b := []Bound{{Selector: Selector{Base: "Join", Parts: []string{"perRemote"}, Unit: "live-heap-B"}, MaxIncrease: ptr(0.1), Reason: "structural cost"}}
	gs := Judge(samples(t, base...), samples(t, up30...), b, 0.05)
	if len(gs) != 1 || gs[0].Verdict != report.GateFail {
		t.Fatalf("+30%% with 5+5 samples must fail: %+v", gs)
	}
	g := gs[0]
	if want := "gate FAIL Join/perRemote:live-heap-B: BenchmarkJoin/clusters=3/services=20/pods=100/istiods=all/perRemote live-heap-B: median 3.92e+06 vs baseline 3.02e+06 (+29.8%, p=0.008 n=5, alpha 0.05) breaks at most +10% vs baseline"; g.Message != want {
		t.Errorf("message\n got %s\nwant %s", g.Message, want)
	}
	if bl := g.Baseline; bl == nil || bl.N != 5 || bl.BaseN != 5 || math.Abs(*bl.Change-0.298) > 0.001 || bl.P > 0.01 {
		t.Errorf("baseline figures: %+v", g.Baseline)
	}
	if gs := Judge(samples(t, base...), samples(t, up5...), b, 0.05); gs[0].Verdict != report.GatePass || !strings.Contains(gs[0].Message, "within at most +10%") {
		t.Errorf("+5%% is within the bound: %+v", gs[0])
	}
	// Beyond the bound but with too few samples: benchstat says "~", so the gate passes and says why.
	if gs := Judge(samples(t, base[:2]...), samples(t, up30[:2]...), b, 0.05); gs[0].Verdict != report.GatePass || !strings.Contains(gs[0].Message, "beyond at most +10% vs baseline but not significant") {
		t.Errorf("2+2 samples: %+v", gs[0])
	}
	// A decrease bound ignores increases and catches decreases.
	down := []Bound{{Selector: b[0].Selector, MaxDecrease: ptr(0.1)}}
	if gs := Judge(samples(t, base...), samples(t, up30...), down, 0.05); gs[0].Verdict != report.GatePass {
		t.Errorf("an increase under a decrease bound: %+v", gs[0])
	}
	if gs := Judge(samples(t, up30...), samples(t, base...), down, 0.05); gs[0].Verdict != report.GateFail {
		t.Errorf("a decrease of 23%%: %+v", gs[0])
	}
	// A selector this run wrote nothing for fails as not measured.
	none := []Bound{{Selector: Selector{Base: "Leave", Unit: "leave-s"}, MaxIncrease: ptr(0.1)}}
	if gs := Judge(samples(t, base...), samples(t, up5...), none, 0.05); gs[0].Verdict != report.GateNotMeasured {
		t.Errorf("nothing to judge: %+v", gs[0])
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	for i, v := range []float64{3e6, 3.1e6} {
		d := filepath.Join(dir, fmt.Sprintf("a-%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, bench.File), []byte(benchLines(v, 0.07)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, files, err := Read(dir)
	if err != nil || len(files) != 2 {
		t.Fatalf("%v %v", files, err)
	}
	k := Key{Name: "Join/clusters=3/services=20/pods=100/istiods=all/perRemote", Unit: "live-heap-B"}
	if got := s[k]; len(got) != 2 || got[0] != 3e6 || got[1] != 3.1e6 {
		t.Errorf("%v", got)
	}
	// A report directory reads its own bench.txt only; a file reads as bench lines.
	if s, files, err := Read(filepath.Join(dir, "a-1")); err != nil || len(files) != 1 || len(s[k]) != 1 {
		t.Errorf("report dir: %v %v", files, err)
	}
	if _, _, err := Read(filepath.Join(dir, "a-1", bench.File)); err != nil {
		t.Error(err)
	}
	if _, _, err := Read(t.TempDir()); err == nil || !strings.Contains(err.Error(), "has no bench.txt, and no sub-directory has one") {
		t.Errorf("empty dir: %v", err)
	}
	if _, _, err := Read(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing baseline must be an error")
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(empty); err == nil || !strings.Contains(err.Error(), "no benchmark lines") {
		t.Errorf("no lines: %v", err)
	}
}

// Benchmarks must name every benchmark bench.Render writes, or a selector of a new one is refused.
func TestBenchmarksAreWhatTheReportWrites(t *testing.T) {
	r := report.New(report.ProviderLocal)
	r.DataPlane = report.DataPlaneEmulated
	r.Setup = &report.Setup{TotalSeconds: 3}
	r.ControlPlane = &report.ControlPlane{ObservedIstiod: "cluster-1", Istiods: report.IstiodsAll,
		Baseline: report.Sample{LiveHeapBytes: report.F(1)},
		Joins:    []report.Join{{Cluster: "cluster-2", RemoteClusters: 1, Sample: report.Sample{LiveHeapBytes: report.F(2)}}},
		Leaves:   []report.Leave{{Cluster: "cluster-2", Seconds: report.F(0.1)}}}
	r.Latency = &report.Latency{Runs: []report.LatencyRun{{Path: report.PathLocal, Connections: report.ConnNew, AvgMs: 1}}}
	r.Churn = &report.Churn{Runs: []report.ChurnRun{{Where: report.ChurnLocal, Mode: "replace", Changes: 1, Samples: 1, P50Ms: report.F(100)}}}
	s := samples(t, string(bench.Render(r)))
	seen := map[string]bool{}
	for k := range s {
		base, _, _ := strings.Cut(k.Name, "/")
		seen[base] = true
	}
	for base := range seen {
		if _, err := ParseSelector(base + ":u"); err != nil {
			t.Errorf("bench.Render writes Benchmark%s, which Benchmarks lacks", base)
		}
	}
	if len(seen) != len(Benchmarks) {
		t.Errorf("bench.Render wrote %v; Benchmarks lists %v", seen, Benchmarks)
	}
}
