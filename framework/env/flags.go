package env

import (
	"flag"
	"fmt"

	"github.com/ambientmc/ambientmc/framework/provider"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Flags are the suite flags. They are registered on the default flag set so that
// `go test ./suites/multicluster -clusters=10` works as written.
type Flags struct {
	Clusters  int
	Networks  int // generated topologies: clusters spread over this many networks (0: one each)
	Topology  string
	Provider  string
	ReportDir string
	Keep      bool

	// Scale of the workloads each cluster gets.
	Scale    string
	Services int
	Pods     int

	// The control plane the suites measure.
	Observe string // whose istiod is measured
	Istiods string // all | observed

	// PlanFactor scales the time plan's estimates (1: the 2-core reference host).
	PlanFactor float64

	Istiod IstiodFlags // -istiod.version, -istiod.binary (istiod_flags.go)
}

// flags holds the values of the registered command-line flags.
var flags = register(flag.CommandLine)

func register(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.IntVar(&f.Clusters, "clusters", 2, "number of clusters: cluster-1..N, each a primary on its own network (ignored with -topology)")
	fs.IntVar(&f.Networks, "networks", 0, "spread the -clusters over K networks round robin, so some share one (0: one network per cluster; 1: a single network)")
	fs.StringVar(&f.Topology, "topology", "", "topology file: ambientmc YAML/JSON or Istio's prow topology JSON (overrides -clusters)")
	fs.StringVar(&f.Provider, "provider", "local", provider.Usage()) // each provider's own flags: framework/provider/<name>
	fs.StringVar(&f.ReportDir, "report-dir", "", "where report.json and friends are written (default: a new directory under the system temp dir)")
	fs.BoolVar(&f.Keep, "keep", false, "keep the clusters after the tests: print their kubeconfigs and how to remove them (also in the report directory's kept.json), then wait for Ctrl-C; kind's clusters outlive the run, the others end with it")
	fs.StringVar(&f.Scale, "scale", "small", "workloads per cluster: small, medium or published (300 services, 4000 pods)")
	fs.IntVar(&f.Services, "services", 0, "global services per cluster (overrides -scale)")
	fs.IntVar(&f.Pods, "pods", 0, "pods per cluster, spread over the services (overrides -scale)")
	fs.StringVar(&f.Observe, "observe", "", "cluster whose istiod the join suite measures (default: the first primary)")
	fs.StringVar(&f.Istiods, "mesh.istiods", report.IstiodsAll, "which primaries run istiod: all, or observed (quieter CPU figures on small hosts)")
	fs.Float64Var(&f.PlanFactor, "plan.factor", 1, "scale the time plan's estimates for this host: 2 for a machine half as fast as the 2-core reference, so the plan trims and refuses in time; below 1 the plan is optimistic and a run may be cut short")
	return f
}

// validate reports flag values that cannot work, naming the flag and the fix.
func (f *Flags) validate() error {
	if f.Topology == "" && f.Clusters < 1 {
		return fmt.Errorf("-clusters=%d: need at least 1 cluster", f.Clusters)
	}
	if f.Topology != "" && f.Networks != 0 {
		return fmt.Errorf("-networks=%d with -topology=%s: a topology file names each cluster's network; drop -networks", f.Networks, f.Topology)
	}
	if f.Networks < 0 {
		return fmt.Errorf("-networks=%d: 0 for one network per cluster, or 1 to -clusters", f.Networks)
	}
	if !(f.PlanFactor > 0 && f.PlanFactor <= 100) {
		return fmt.Errorf("-plan.factor=%g: a positive factor up to 100 (1 for the 2-core reference host, 2 for a host half as fast)", f.PlanFactor)
	}
	if f.Istiods != report.IstiodsAll && f.Istiods != report.IstiodsObserved {
		return fmt.Errorf("-mesh.istiods=%s: choose %s or %s", f.Istiods, report.IstiodsAll, report.IstiodsObserved)
	}
	return f.Istiod.validate()
}
