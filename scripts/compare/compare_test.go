package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
	"github.com/ambientmc/ambientmc/framework/report/render"
)

// roundReport is a join-and-leave report whose live heap per remote cluster is perRemote bytes.
func roundReport(perRemote float64) *report.Report {
	r := report.New(report.ProviderLocal)
	r.Topology.Clusters = []report.TopologyCluster{{Name: "cluster-1"}, {Name: "cluster-2"}, {Name: "cluster-3"}}
	live := func(n float64) report.Sample {
		return report.Sample{LiveHeapBytes: report.F(20e6 + n*perRemote), RSSBytes: report.F(100e6 + n*2*perRemote)}
	}
	r.ControlPlane = &report.ControlPlane{ObservedIstiod: "cluster-1", Istiods: report.IstiodsAll, Baseline: live(0),
		Joins: []report.Join{
			{Cluster: "cluster-2", RemoteClusters: 1, ConvergenceSeconds: report.F(0.3), JoinCPUSeconds: report.F(0.1), Sample: live(1)},
			{Cluster: "cluster-3", RemoteClusters: 2, ConvergenceSeconds: report.F(0.5), JoinCPUSeconds: report.F(0.1), Sample: live(2)},
		},
		Leaves: []report.Leave{
			{Cluster: "cluster-3", RemoteClusters: 1, Seconds: report.F(1), LiveHeapBytes: report.F(20e6 + 1.5*perRemote)},
			{Cluster: "cluster-2", RemoteClusters: 0, Seconds: report.F(2), LiveHeapBytes: report.F(20e6 + perRemote)},
		}}
	if err := analysis.FitPerRemote(r.ControlPlane); err != nil {
		panic(err)
	}
	return r
}

func TestMarkdownTable(t *testing.T) {
	dir := t.TempDir()
	sides := []*side{
		{Label: "A", Spec: bins.IstiodSpec{Version: "v1"}, Build: &bins.IstiodBuild{ModuleVersion: "v1", SHA256: strings.Repeat("a", 64), VersionOutput: "one"}},
		{Label: "B", Spec: bins.IstiodSpec{Binary: "/x/pd"}, Build: &bins.IstiodBuild{Path: "/x/pd", SHA256: strings.Repeat("b", 64), VersionOutput: "two"}},
	}
	for i, s := range sides {
		for round, v := range []float64{3e6, 4e6, 5e6} {
			d := filepath.Join(dir, s.Label, string(rune('0'+round)))
			require.NoError(t, os.MkdirAll(d, 0o755))
			require.NoError(t, render.Write(d, roundReport(v*float64(i+1))))
			s.Dirs = append(s.Dirs, d)
		}
	}
	md, err := markdown(sides, 3, []string{"-clusters=3"})
	require.NoError(t, err)
	text := string(md)
	for _, want := range []string{
		"| A | v1 | aaaaaaaaaaaa | `one` |",
		"| B | /x/pd | bbbbbbbbbbbb | `two` |",
		"| Live heap per remote cluster | MB | 4.00 (3.00 … 5.00, n=3) | 8.00 (6.00 … 10.0, n=3) | 4.00 MB (+100%) |",
		"| Convergence (mean over joins) | s | 0.4 (0.4 … 0.4, n=3) | 0.4 (0.4 … 0.4, n=3) | 0 s (+0%) |",
		"| Leave time (mean over leaves) | s | 1.50 ",
		// Peak 2 remotes minus after all left: perRemote returned, perRemote kept.
		"| Live heap returned after leaving | MB | 4.00 (3.00 … 5.00, n=3) |",
		"| Live heap kept after leaving | MB | 4.00 ",
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "Latency", "no latency rows when the data-plane suites did not run")
	assert.NotContains(t, text, "Heap in use", "a figure no round measured is absent, not 0")
}

func TestSpecOf(t *testing.T) {
	s, err := specOf("A", "v0.0.0-20260826214018-9739e10eb9d7")
	require.NoError(t, err)
	assert.Equal(t, "v0.0.0-20260826214018-9739e10eb9d7", s.Version)
	s, err = specOf("B", "./my/pilot-discovery")
	require.NoError(t, err)
	assert.Equal(t, "./my/pilot-discovery", s.Binary)
	_, err = specOf("B", "")
	assert.ErrorContains(t, err, "B is empty")
}
