package env

import (
	"flag"
	"fmt"
)

// Flags are the suite flags. They are registered on the default flag set so that
// `go test ./suites/multicluster -clusters=10` works as written.
type Flags struct {
	Clusters  int
	Topology  string
	Provider  string
	ReportDir string
	Keep      bool
}

// flags holds the values of the registered command-line flags.
var flags = register(flag.CommandLine)

func register(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.IntVar(&f.Clusters, "clusters", 2, "number of clusters: cluster-1..N, each a primary on its own network (ignored with -topology)")
	fs.StringVar(&f.Topology, "topology", "", "topology file: ambientmc YAML/JSON or Istio's prow topology JSON (overrides -clusters)")
	fs.StringVar(&f.Provider, "provider", "local", "where clusters come from: local (embedded kube-apiserver and etcd)")
	fs.StringVar(&f.ReportDir, "report-dir", "", "where report.json and friends are written (default: a new directory under the system temp dir)")
	fs.BoolVar(&f.Keep, "keep", false, "keep the clusters after the tests, print their kubeconfigs and wait for Ctrl-C")
	return f
}

// validate reports flag values that cannot work, naming the flag and the fix.
func (f *Flags) validate() error {
	if f.Topology == "" && f.Clusters < 1 {
		return fmt.Errorf("-clusters=%d: need at least 1 cluster", f.Clusters)
	}
	return nil
}
