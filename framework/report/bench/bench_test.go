package bench

import (
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

var benchLine = regexp.MustCompile(`^Benchmark\S+\s+\d+(\s+[-0-9.e+]+\s+\S+)+$`)

var benchHeader = regexp.MustCompile(`^[a-z][^\sA-Z:]*: .+$`)

func TestBenchLines(t *testing.T) {
	r := reporttest.Full()
	r.Setup.Clusters[0].Name = "cluster one" // spaces must not leak into names
	b := Render(r)
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

func TestChurnBenchLines(t *testing.T) {
	b := string(Render(reporttest.Churn()))
	assert.Contains(t, b, "BenchmarkChurn/clusters=3/where=local/mode=replace/rate=20 1 4800 p50-ms")
	assert.Contains(t, b, "BenchmarkChurn/clusters=3/where=one-remote/mode=replace/rate=2 1 ")
	assert.Contains(t, b, " 5 wds-pushes/s")
	for _, l := range strings.Split(b, "\n") {
		if strings.HasPrefix(l, "BenchmarkChurn") {
			assert.Len(t, strings.Fields(l)[:2], 2)
			assert.Equal(t, "1", strings.Fields(l)[1], "iteration count")
		}
	}
}

// A shared etcd gets a line of its own with its database size, and the setup's time breakdown
// reaches the setup line.
func TestSetupLines(t *testing.T) {
	r := reporttest.SharedEtcd()
	lines := string(Render(r))
	for _, want := range []string{
		"BenchmarkSetup/clusters=3/services=300/pods=4000 1 40 total-s 12.5 apiservers-ready-s 21.25 crds-established-s 2.3e+08 rss-per-cluster-B 1.6e+08 unique-per-cluster-B",
		"BenchmarkSetup/clusters=3/services=300/pods=4000/shared=etcd 1 1.5e+08 rss-B 3e+07 db-B",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("bench.txt lacks %q:\n%s", want, lines)
		}
	}
}
