package gates

import (
	"path/filepath"
	"testing"

	"github.com/ambientmc/ambientmc/framework/ci/baseline"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
	"github.com/ambientmc/ambientmc/framework/report/bench"
)

// joinedReport is a control-plane report with every section the bench lines come from.
func joinedReport() *report.Report {
	r := report.New(report.ProviderLocal)
	r.Topology.Clusters = []report.TopologyCluster{{Name: "cluster-1"}, {Name: "cluster-2"}, {Name: "cluster-3"}}
	r.Scale = &report.Scale{ServicesPerCluster: 20, PodsPerCluster: 100}
	s := func(n float64) report.Sample {
		return report.Sample{LiveHeapBytes: report.F(20e6 + n*3e6), RSSBytes: report.F(100e6 + n*5e6), HeapInuseBytes: report.F(30e6 + n*4e6)}
	}
	r.ControlPlane = &report.ControlPlane{ObservedIstiod: "cluster-1", Istiods: report.IstiodsAll, Baseline: s(0),
		Joins: []report.Join{
			{Cluster: "cluster-2", RemoteClusters: 1, ConvergenceSeconds: report.F(0.3), SyncSeconds: report.F(0.1), JoinCPUSeconds: report.F(0.07), Sample: s(1)},
			{Cluster: "cluster-3", RemoteClusters: 2, ConvergenceSeconds: report.F(0.4), SyncSeconds: report.F(0.2), JoinCPUSeconds: report.F(0.08), Sample: s(2)},
		},
		Leaves: []report.Leave{{Cluster: "cluster-3", RemoteClusters: 1, Seconds: report.F(0.1), LiveHeapBytes: report.F(24e6)},
			{Cluster: "cluster-2", RemoteClusters: 0, Seconds: report.F(0.1), LiveHeapBytes: report.F(21e6)}}}
	if err := analysis.FitPerRemote(r.ControlPlane); err != nil {
		panic(err)
	}
	analysis.FitJoinGrowth(r.ControlPlane)
	return r
}

// The project's own gates files load (every path is in the schema), and every baseline selector
// names bench lines the report writes.
func TestProjectGatesFiles(t *testing.T) {
	files, err := filepath.Glob("../../../gates/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("gates files: %v %v", files, err)
	}
	lines := baseline.Samples{}
	if err := lines.ReadBench("joined", bench.Render(joinedReport())); err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		f, err := Load(name)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, b := range f.Baseline {
			if len(lines.Match(b.Selector)) == 0 {
				t.Errorf("%s: baseline bound %s matches no bench line bench.Render writes", name, b.Selector)
			}
		}
	}
}
