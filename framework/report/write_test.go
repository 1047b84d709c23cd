package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// parseSVG checks the file is well-formed XML with an <svg> root and returns its text content
// and the data-series attributes, which name the plotted series.
func parseSVG(t *testing.T, path string) (text string, series map[string]int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	series = map[string]int{}
	var sb strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			for _, a := range tok.Attr {
				if a.Name.Local == "data-series" {
					series[a.Value]++
				}
			}
		case xml.CharData:
			sb.Write(tok)
			sb.WriteByte('\n')
		}
	}
	if root != "svg" {
		t.Fatalf("%s root element is %q", path, root)
	}
	return sb.String(), series
}

func TestWriteProducesAllFiles(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, fullReport()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{JSONFile, MarkdownFile, BenchFile, ControlPlaneSVG, LatencySVG} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (size %v)", f, err, st)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func TestControlPlaneSVG(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, fullReport()); err != nil {
		t.Fatal(err)
	}
	text, series := parseSVG(t, filepath.Join(dir, ControlPlaneSVG))
	// Three levels (baseline + 2 joins) per memory/CPU series, one polyline each.
	for _, s := range []string{"RSS", "heap in use", "live heap", "blended CPU", "steady CPU", "join CPU-seconds"} {
		if series[s] != 1 {
			t.Errorf("series %q drawn %d times, want 1", s, series[s])
		}
		if !strings.Contains(text, s) {
			t.Errorf("legend lacks %q", s)
		}
	}
	for _, label := range []string{"joined remote clusters", "MB", "CPU cores", "CPU-seconds"} {
		if !strings.Contains(text, label) {
			t.Errorf("axis label %q missing", label)
		}
	}
	// Tooltips carry the values: the baseline RSS is 150 MB, the second join's 390 MB.
	for _, v := range []string{"RSS: 150 MB at 0", "RSS: 390 MB at 2", "live heap: 92 MB at 1"} {
		if !strings.Contains(text, v) {
			t.Errorf("point %q missing", v)
		}
	}
}

func TestLatencySVG(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, fullReport()); err != nil {
		t.Fatal(err)
	}
	text, series := parseSVG(t, filepath.Join(dir, LatencySVG))
	// 4 runs + 1 harness floor run, one bar per statistic each.
	for _, s := range []string{"avg", "p50", "p90", "p99"} {
		if series[s] != 5 {
			t.Errorf("%s bars = %d, want 5", s, series[s])
		}
	}
	for _, v := range []string{"cross-cluster", "direct", "reused", "cross-cluster new p99: 6.1 ms", "ms"} {
		if !strings.Contains(text, v) {
			t.Errorf("latency chart lacks %q", v)
		}
	}
}

var benchLine = regexp.MustCompile(`^Benchmark\S+\s+\d+(\s+[-0-9.e+]+\s+\S+)+$`)
var benchHeader = regexp.MustCompile(`^[a-z][^\sA-Z:]*: .+$`)

func TestBenchLines(t *testing.T) {
	r := fullReport()
	r.Setup.Clusters[0].Name = "cluster one" // spaces must not leak into names
	b := Bench(r)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 3 || lines[0] != "goos: "+runtime.GOOS || !strings.HasPrefix(lines[1], "goarch: ") ||
		lines[2] != "pkg: github.com/ambientmc/ambientmc/suites/multicluster" {
		t.Errorf("header = %q", lines[:min(3, len(lines))])
	}
	names := map[string]string{}
	for _, l := range lines {
		if strings.HasPrefix(l, "Benchmark") {
			if !benchLine.MatchString(l) {
				t.Errorf("not a benchmark line: %q", l)
			}
			name, rest, _ := strings.Cut(l, " ")
			names[name] = rest
		} else if !benchHeader.MatchString(l) {
			t.Errorf("not a header line: %q", l)
		}
	}
	want := map[string][]string{
		"BenchmarkJoin/clusters=3/services=300/pods=4000/istiods=all/join=0":    {"1.5e+08 rss-B", "4.5e+07 live-heap-B"},
		"BenchmarkJoin/clusters=3/services=300/pods=4000/istiods=all/join=2":    {"0.55 sync-s", "2 convergence-s", "2.9 join-cpu-s", "3.9e+08 rss-B", "1.4e+08 live-heap-B"},
		"BenchmarkJoin/clusters=3/services=300/pods=4000/istiods=all/perRemote": {"rss-B", "rss-stderr-B", "live-heap-B", "join-cpu-s"},
		"BenchmarkLeave/clusters=3/services=300/pods=4000/istiods=all/leave=1":  {"1.2 leave-s", "1 managed-remote-clusters"},
		"BenchmarkLatency/path=cross-cluster/conn=new/qps=100":                  {"2.8 avg-ms", "2.5 p50-ms", "3.6 p90-ms", "6.1 p99-ms", "1 errors"},
		"BenchmarkLatency/path=direct/conn=new/qps=100":                         {"0.1 avg-ms"},
		"BenchmarkSetup/clusters=3/services=300/pods=4000":                      {"12.3 total-s"},
		"BenchmarkSetup/clusters=3/services=300/pods=4000/cluster=cluster_one":  {"4.2 ready-s", "rss-kube-apiserver-B"},
		"BenchmarkLatency/path=local/conn=reused/qps=100":                       {"0.2 avg-ms"},
		"BenchmarkLatency/path=cross-cluster/conn=reused/qps=100":               {"0.35 avg-ms"},
		"BenchmarkJoin/clusters=3/services=300/pods=4000/istiods=all/join=1":    {"0.61 sync-s"},
		"BenchmarkLatency/path=local/conn=new/qps=100":                          {"0.8 avg-ms"},
		// Peak live heap 140e6 (2 remotes) to 95e6 after one left; 92e6 at 1 remote on the way up.
		"BenchmarkLeave/clusters=3/services=300/pods=4000/istiods=all/returned": {"4.5e+07 returned-live-heap-B", "9e+07 returned-rss-B", "3e+06 leftover-live-heap-B", "3e+07 leftover-rss-B"},
	}
	for name, parts := range want {
		rest, ok := names[name]
		if !ok {
			t.Errorf("missing %s; have %v", name, names)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(rest, p) {
				t.Errorf("%s: %q lacks %q", name, rest, p)
			}
		}
	}
	if len(names) != len(want) {
		t.Errorf("%d benchmark lines, want %d:\n%s", len(names), len(want), b)
	}
}

func TestMarkdown(t *testing.T) {
	md := string(Markdown(fullReport()))
	for _, want := range []string{
		"# ambientmc report: local provider, emulated data plane",
		EmulatedNote,
		"2 CPUs",
		"300 services, 4000 pods per cluster",
		"| istiod | v0.0.0-20260826214018-9739e10eb9d7 (/cache/pilot-discovery-0123/pilot-discovery, sha256 0123456789ab, go1.26.8); replaced pins: istio.io/api v1.30.4-0.20260824163423-69099aec2678 => v1.30.8 |",
		"| 2 | cluster-3 | split-horizon | 0.55 |",    // joins table
		"| RSS (MB) | 120.0 ± 0.0 | 180 MB |",         // slope beside the published figure
		"0.010 cores (1.0% of a core)",                // published CPU
		"| cluster-3 | 1 | 1.20 | 300.0 | 95.0 | 1 |", // leaves table
		"| new | +2.00 ms (+250%) |",
		"| reused | +0.15 ms (+75%) |",
		"Not comparable with the published figures: the host was saturated",
		"host has 2 CPUs; CPU figures are noisy",
		"](controlplane.svg)",
		"](latency.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if strings.Contains(md, "+2.20 ms (+346%)") {
		t.Error("a saturated run's overhead is set beside the published figures")
	}
	calm := fullReport()
	calm.Latency.HostCPUSaturated = false
	calm.Latency.RateSearch = &RateSearch{QPS: 400, Rule: "the rule", Steps: []RateStep{
		{QPS: 400, AchievedQPS: 399, HostCPUBusy: 0.5, Accepted: true}, {QPS: 700, AchievedQPS: 520, HostCPUBusy: 0.95, Reason: "only 74% of the rate got through"}}}
	calmMD := string(Markdown(calm))
	for _, want := range []string{
		"| new | +2.00 ms (+250%) | +2.20 ms (+346%) |",
		"| reused | +0.15 ms (+75%) | +0.13 ms (+72%) |",
		"Request rate: 400.0 QPS, the highest this host carried",
		"| 700.0 | 520.0 | 95% | false | only 74% of the rate got through |",
	} {
		if !strings.Contains(calmMD, want) {
			t.Errorf("unsaturated report.md lacks %q", want)
		}
	}
	r := fullReport()
	r.Provider, r.DataPlane = ProviderKind, DataPlaneZtunnel
	if md := string(Markdown(r)); strings.Contains(md, EmulatedNote) || !strings.Contains(md, "kind provider, ztunnel data plane") {
		t.Error("ztunnel report: wrong title or emulated note present")
	}
}

func TestWriteOmitsChartsForAbsentSections(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, fullReport()); err != nil {
		t.Fatal(err)
	}
	// Same directory, a run without control plane or latency: old charts must not survive.
	r := New(ProviderLocal)
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ControlPlaneSVG, LatencySVG} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still present (err %v)", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if strings.Contains(string(md), ".svg") || strings.Contains(string(md), "## Latency") {
		t.Errorf("report.md mentions absent sections:\n%s", md)
	}
}

func TestWriteRejectsInvalid(t *testing.T) {
	r := fullReport()
	r.DataPlane = "sidecar" // no provider declares it
	dir := t.TempDir()
	if err := Write(dir, r); err == nil {
		t.Fatal("Write accepted dataPlane sidecar")
	}
	if _, err := os.Stat(filepath.Join(dir, JSONFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("report.json written for an invalid report (err %v)", err)
	}
}
