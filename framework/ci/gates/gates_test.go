package gates

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/markdown"
)

// schemaPathsFile bounds the paths the issue and the project's own gates files use.
const schemaPathsFile = `
gates:
  controlPlane.perRemoteCluster.liveHeapBytes.value: {max: 5e6, reason: "structural cost"}
  controlPlane.joinGrowth.convergenceSeconds.slope: {max: 0.05}
  controlPlane.joins[*].convergenceSeconds: {max: 2}
  controlPlane.joins[0].liveHeapBytes: {min: 1}
  latency.overhead.new.deltaMs: {max: 4}
  latency.hostCPUSaturated: {in: ["false"]}
  churn.runs[*].lost: {max: 0}
  istiodChecks[*].result: {in: [pass, known-issue]}
  setup.clusters[*].rssBytes.kube-apiserver: {max: 5e8}
`

// The paths the issue and the project's own gates files use must load.
func TestPathsOfTheSchemaLoad(t *testing.T) {
	f, err := Parse("t.yaml", []byte(schemaPathsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Bounds) != 9 || f.Bounds[0].Path != "controlPlane.perRemoteCluster.liveHeapBytes.value" || f.Bounds[8].Path != "setup.clusters[*].rssBytes.kube-apiserver" {
		t.Fatalf("bounds not in file order: %+v", f.Bounds)
	}
	if f.Bounds[0].Reason != "structural cost" || *f.Bounds[0].Max != 5e6 {
		t.Errorf("first bound read as %+v", f.Bounds[0])
	}
}

// Every value report.json can hold must be reachable by some path: walk the schema's types and
// resolve each leaf's path, so a new report field never makes the gates blind to it.
func TestEveryReportValueHasAPath(t *testing.T) {
	var n int
	var visit func(t reflect.Type, prefix string, depth int)
	visit = func(rt reflect.Type, prefix string, depth int) {
		rt = deref(rt)
		if depth > 8 {
			return
		}
		switch rt.Kind() {
		case reflect.Struct:
			for _, k := range keys(rt) {
				f, _ := field(rt, k)
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				if p == "gates" {
					continue
				}
				ft := deref(f.Type)
				if ft.Kind() == reflect.Slice {
					p += "[*]"
					ft = deref(ft.Elem())
				}
				if ft.Kind() == reflect.Map {
					p += ".someKey"
					ft = deref(ft.Elem())
				}
				visit(ft, p, depth+1)
			}
		default:
			n++
			pp, err := parsePath(prefix)
			if err == nil {
				_, err = resolve(pp)
			}
			if err != nil {
				t.Errorf("%s: %v", prefix, err)
			}
		}
	}
	visit(reportType, "", 0)
	if n < 100 {
		t.Fatalf("only %d leaves visited: the walk is broken", n)
	}
}

// badGatesFiles are refused, each with a substring of its error; FuzzParse starts from them too.
var badGatesFiles = []struct{ name, file, want string }{
	{"unknown key", "gates:\n  controlPlane.perRemoteCluster.liveHeap: {max: 1}\n", `line 2: gates.controlPlane.perRemoteCluster.liveHeap: no key "liveHeap" under controlPlane.perRemoteCluster in the report schema (framework/report); known keys: cpuCores,`},
	{"growth has no b", "gates:\n  controlPlane.joinGrowth.convergenceSeconds.b: {max: 0.05}\n", `gates.controlPlane.joinGrowth.convergenceSeconds.b: no key "b" under controlPlane.joinGrowth.convergenceSeconds in the report schema (framework/report); known keys: intercept, n, slope, slopeStdErr`},
	{"unknown top key", "gates:\n  controlplane.joins[*].syncSeconds: {max: 1}\n", `no key "controlplane" at the top`},
	{"list without index", "gates:\n  churn.runs.lost: {max: 0}\n", "churn.runs is a list: write churn.runs[*] (every element) or churn.runs[0] (the first)"},
	{"index on a value", "gates:\n  latency.overhead[0].new.deltaMs: {max: 1}\n", "latency.overhead is not a list, so it takes no index"},
	{"section", "gates:\n  controlPlane.perRemoteCluster: {max: 1}\n", "gates.controlPlane.perRemoteCluster: a section, not a value: name one of its keys (cpuCores,"},
	{"below a value", "gates:\n  latency.overhead.new.deltaMs.x: {max: 1}\n", `latency.overhead.new.deltaMs is a value, it has no key "x"`},
	{"max on text", "gates:\n  istiodChecks[*].result: {max: 1}\n", "max: the value is text, so it takes in: [...], not max"},
	{"in on a number", "gates:\n  churn.runs[*].lost: {in: [0]}\n", "in: the value is a number: bound it with min and max"},
	{"empty in", "gates:\n  istiodChecks[*].result: {in: []}\n", "give a non-empty list"},
	{"min above max", "gates:\n  churn.runs[*].lost: {min: 2, max: 1}\n", "min 2 is above max 1: nothing can pass"},
	{"no bound", "gates:\n  churn.runs[*].lost: {reason: x}\n", "no bound: give min, max (numbers) or in (a list)"},
	{"unknown bound key", "gates:\n  churn.runs[*].lost: {maxx: 0}\n", `unknown key "maxx"; known: min, max, in, reason`},
	{"not a number", "gates:\n  churn.runs[*].lost: {max: 5MB}\n", `"5MB" is not a number`},
	{"twice", "gates:\n  churn.runs[*].lost: {max: 0}\n  churn.runs[*].lost: {max: 1}\n", "line 3: gates: \"churn.runs[*].lost\" appears twice"},
	{"bad index", "gates:\n  churn.runs[x].lost: {max: 0}\n", "the index must be * or a number from 0"},
	{"signed index", "gates:\n  churn.runs[-0].lost: {max: 0}\n", `"runs[-0]": the index must be * or a number from 0`},
	{"index with a leading 0", "gates:\n  churn.runs[01].lost: {max: 0}\n", `"runs[01]": the index must be * or a number from 0`},
	{"reason not text", "gates:\n  churn.runs[*].lost: {max: 0, reason: [a, b]}\n", "line 2: gates.churn.runs[*].lost: reason: write it as one piece of text"},
	{"baseline reason not text", "baseline:\n  bounds:\n    Join/perRemote:live-heap-B: {maxIncrease: 10%, reason: {a: b}}\n", "baseline.bounds.Join/perRemote:live-heap-B: reason: write it as one piece of text"},
	{"gates on gates", "gates:\n  gates[*].verdict: {in: [pass]}\n", "a gate cannot bound the gates"},
	{"unknown section", "gate:\n  churn.runs[*].lost: {max: 0}\n", `unknown key "gate"; known: gates, baseline`},
	{"empty", "", "empty: give a gates: mapping"},
	{"empty document", "---", "empty: give a gates: mapping"},
	{"null document", "~\n", "empty: give a gates: mapping"},
	{"no bounds", "gates: {}\n", "no bounds"},
	{"baseline selector", "baseline:\n  bounds:\n    Joins/perRemote:live-heap-B: {maxIncrease: 10%}\n", `no benchmark "Joins" in bench.txt; the benchmarks are Setup, Join, Leave, Latency, Churn`},
	{"baseline without unit", "baseline:\n  bounds:\n    Join/perRemote: {maxIncrease: 10%}\n", "a benchmark selector is NAME:UNIT"},
	{"baseline NaN", "baseline:\n  bounds:\n    Join/perRemote:live-heap-B: {maxIncrease: NaN%}\n", `maxIncrease: "NaN%": write the bound as a percentage, e.g. 10%`},
	{"baseline percent", "baseline:\n  bounds:\n    Join/perRemote:live-heap-B: {maxIncrease: 0.1}\n", `maxIncrease: "0.1": write the bound as a percentage, e.g. 10%`},
	{"baseline no bound", "baseline:\n  bounds:\n    Join/perRemote:live-heap-B: {reason: x}\n", "give maxIncrease or maxDecrease"},
	{"alpha", "baseline:\n  alpha: 5\n  bounds:\n    Join/perRemote:live-heap-B: {maxIncrease: 10%}\n", "baseline.alpha: \"5\" must be between 0 and 1"},
	{"yaml", "gates: [\n", "yaml:"},
}

// Bad input is refused before anything starts, with the field and the fix.
func TestBadGatesFilesAreRefused(t *testing.T) {
	for _, c := range badGatesFiles {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	_, err := Load("/nonexistent/gates.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "-gates=/nonexistent/gates.yaml: ") {
		t.Fatalf("got %v", err)
	}
}

// sampleReport has a control plane, latency and checks, but no churn.
func sampleReport() *report.Report {
	r := report.New(report.ProviderLocal)
	r.DataPlane = report.DataPlaneEmulated
	r.ControlPlane = &report.ControlPlane{ObservedIstiod: "cluster-1", Istiods: report.IstiodsAll,
		PerRemoteCluster: &report.PerRemote{LiveHeapBytes: &report.Estimate{Value: 3.05e6}, RSSBytes: &report.Estimate{Value: 4.7e6}},
		Joins: []report.Join{
			{Cluster: "cluster-2", RemoteClusters: 1, ConvergenceSeconds: report.F(0.37)},
			{Cluster: "cluster-3", RemoteClusters: 2, ConvergenceSeconds: report.F(2.5)},
		}}
	r.Latency = &report.Latency{Overhead: &report.Overhead{New: &report.Delta{DeltaMs: 2.04, Percent: 472}}}
	r.IstiodChecks = []report.IstiodCheck{{Name: "a", Result: report.CheckPass}, {Name: "b", Result: report.CheckKnownIssue, Reference: "x#1"}}
	return r
}

func judge(t *testing.T, r *report.Report, file string) []report.Gate {
	t.Helper()
	f, err := Parse("t.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	js, err := report.JSON(r)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := f.Judge(js)
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

func TestJudge(t *testing.T) {
	gs := judge(t, sampleReport(), `
gates:
  controlPlane.perRemoteCluster.liveHeapBytes.value: {max: 5e6}
  controlPlane.perRemoteCluster.rssBytes.value: {max: 2e6, reason: "RSS per remote cluster at small scale"}
  controlPlane.joins[*].convergenceSeconds: {max: 1}
  latency.overhead.new.deltaMs: {min: 0, max: 4}
  istiodChecks[*].result: {in: [pass, known-issue]}
  istiodChecks[1].result: {in: [pass]}
  churn.runs[*].lost: {max: 0}
  controlPlane.perRemoteCluster.steadyCPUCores.value: {max: 1}
  latency.hostCPUSaturated: {in: ["false"]}
`[1:])
	want := []struct{ verdict, message string }{
		{"pass", "gate pass controlPlane.perRemoteCluster.liveHeapBytes.value = 3.05e+06, within max 5e+06"},
		{"fail", "gate FAIL controlPlane.perRemoteCluster.rssBytes.value: controlPlane.perRemoteCluster.rssBytes.value = 4.7e+06 breaks max 2e+06 (RSS per remote cluster at small scale)"},
		{"fail", "gate FAIL controlPlane.joins[*].convergenceSeconds: controlPlane.joins[1].convergenceSeconds = 2.5 breaks max 1 (1 of 2 values)"},
		{"pass", "gate pass latency.overhead.new.deltaMs = 2.04, within min 0, max 4"},
		{"pass", "gate pass istiodChecks[*].result = pass, known-issue, within in [pass known-issue]"},
		{"fail", "gate FAIL istiodChecks[1].result: istiodChecks[1].result = known-issue breaks in [pass]"},
		{"not-measured", "gate FAIL churn.runs[*].lost: not measured: this run's report has no churn (bound max 0)"},
		{"not-measured", "gate FAIL controlPlane.perRemoteCluster.steadyCPUCores.value: not measured: this run's report has no controlPlane.perRemoteCluster.steadyCPUCores (bound max 1)"},
		{"pass", "gate pass latency.hostCPUSaturated = false, within in [false]"},
	}
	if len(gs) != len(want) {
		t.Fatalf("%d gates, want %d: %+v", len(gs), len(want), gs)
	}
	for i, w := range want {
		if gs[i].Verdict != w.verdict || gs[i].Message != w.message {
			t.Errorf("gate %d:\n got %s: %s\nwant %s: %s", i, gs[i].Verdict, gs[i].Message, w.verdict, w.message)
		}
	}
	// A false flag is left out of report.json, but its section being there makes it false; with
	// no section it is not measured.
	noLatency := sampleReport()
	noLatency.Latency = nil
	if g := judge(t, noLatency, "gates:\n  latency.hostCPUSaturated: {in: [\"false\"]}\n")[0]; g.Verdict != report.GateNotMeasured {
		t.Errorf("flag of an absent section: %+v", g)
	}
	if v := gs[2].Values; len(v) != 2 || v[1].Path != "controlPlane.joins[1].convergenceSeconds" || v[1].Pass || !v[0].Pass {
		t.Errorf("values of the [*] gate: %+v", v)
	}
	// The gates section round-trips through a report that validates.
	r := sampleReport()
	r.Gates = gs
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	md := string(markdown.Render(r))
	if !strings.Contains(md, "## Gates\n\n5 of 9 broken.") || !strings.Contains(md, "| churn.runs[*].lost | max 0 | not measured | not-measured |") {
		t.Errorf("report.md gates section:\n%s", md)
	}
}

// A value that is present but zero is measured: the gate judges it, it does not call it absent.
func TestZeroIsAValue(t *testing.T) {
	r := sampleReport()
	r.Churn = &report.Churn{Runs: []report.ChurnRun{{Where: report.ChurnLocal, Mode: "replace", Lost: 0}, {Where: report.ChurnLocal, Mode: "replace", Lost: 3}}}
	gs := judge(t, r, "gates:\n  churn.runs[*].lost: {max: 0}\n")
	if gs[0].Verdict != report.GateFail || gs[0].Message != "gate FAIL churn.runs[*].lost: churn.runs[1].lost = 3 breaks max 0 (1 of 2 values)" {
		t.Fatalf("%+v", gs[0])
	}
	r.Churn.Runs[1].Lost = 0
	if gs := judge(t, r, "gates:\n  churn.runs[*].lost: {max: 0}\n"); gs[0].Verdict != report.GatePass {
		t.Fatalf("%+v", gs[0])
	}
}
