package env

import (
	"flag"
	"fmt"
	"time"
)

// Flags are the suite flags. They are registered on the default flag set so that
// `go test ./suites/multicluster -clusters=10` works as written.
type Flags struct {
	Clusters  int
	Topology  string
	Provider  string
	ReportDir string
	Keep      bool

	// Scale of the workloads each cluster gets.
	Scale    string
	Services int
	Pods     int

	// Control-plane join suite.
	Observe     string        // whose istiod is measured
	Istiods     string        // all | observed
	JoinTimeout time.Duration // per join, until converged
	JoinSettle  time.Duration // after convergence, before memory samples (0: by scale)
	JoinSteady  time.Duration // steady-CPU window ending at the settle point (0: by scale)
	JoinSamples int           // memory samples per step
	XDSClients  int           // ztunnel-like xDS clients on the observed istiod during joins (0: by scale)

	// Latency suites (Istio's data-plane benchmark defaults: 1 KB, 16 connections, 1000 QPS).
	LatencyDuration    time.Duration
	LatencyQPS         float64
	LatencyConnections int
	LatencyPayload     int

	Istiod IstiodFlags // -istiod.version, -istiod.binary (istiod_flags.go)

	// Istio images and options of the providers that install into real clusters.
	ProviderFlags

	// Churn suite (churn_flags.go).
	Churn ChurnFlags
}

// flags holds the values of the registered command-line flags.
var flags = register(flag.CommandLine)

func register(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.IntVar(&f.Clusters, "clusters", 2, "number of clusters: cluster-1..N, each a primary on its own network (ignored with -topology)")
	fs.StringVar(&f.Topology, "topology", "", "topology file: ambientmc YAML/JSON or Istio's prow topology JSON (overrides -clusters)")
	fs.StringVar(&f.Provider, "provider", "local", "where clusters come from: local (embedded kube-apiserver and etcd), kind (kind clusters on Docker) or kube (existing clusters named by -topology)")
	fs.StringVar(&f.ReportDir, "report-dir", "", "where report.json and friends are written (default: a new directory under the system temp dir)")
	fs.BoolVar(&f.Keep, "keep", false, "keep the clusters after the tests, print their kubeconfigs and wait for Ctrl-C")
	fs.StringVar(&f.Scale, "scale", "small", "workloads per cluster: small, medium or published (300 services, 4000 pods)")
	fs.IntVar(&f.Services, "services", 0, "global services per cluster (overrides -scale)")
	fs.IntVar(&f.Pods, "pods", 0, "pods per cluster, spread over the services (overrides -scale)")
	fs.StringVar(&f.Observe, "observe", "", "cluster whose istiod the join suite measures (default: the first primary)")
	fs.StringVar(&f.Istiods, "mesh.istiods", "all", "which primaries run istiod: all, or observed (quieter CPU figures on small hosts)")
	fs.DurationVar(&f.JoinTimeout, "join.timeout", 2*time.Minute, "how long one join may take to converge")
	fs.DurationVar(&f.JoinSettle, "join.settle", 0, "wait after convergence before sampling istiod (0: 6s small, 20s medium, 30s published)")
	fs.DurationVar(&f.JoinSteady, "join.steady", 0, "steady-CPU window ending at the settle point (0: 4s small, 15s medium, 20s published)")
	fs.IntVar(&f.JoinSamples, "join.samples", 3, "memory samples (1s apart) per join; medians are reported")
	fs.IntVar(&f.XDSClients, "join.xds-clients", 0, "ztunnel-like delta xDS clients connected to the observed istiod during the joins, as the fake ztunnels of Istio's published test (0: 15 at published scale, 1 otherwise)")
	fs.DurationVar(&f.LatencyDuration, "latency.duration", 10*time.Second, "length of each latency run")
	fs.Float64Var(&f.LatencyQPS, "latency.qps", 0, "requests per second of each latency run, all connections together (0: the highest rate up to 1000 this host carries, found by short probe steps)")
	fs.IntVar(&f.LatencyConnections, "latency.connections", 16, "concurrent connections of each latency run")
	fs.IntVar(&f.LatencyPayload, "latency.payload", 1024, "response size in bytes")
	registerProvider(fs, &f.ProviderFlags)
	registerChurn(fs, &f.Churn)
	return f
}

// validate reports flag values that cannot work, naming the flag and the fix.
func (f *Flags) validate() error {
	if f.Topology == "" && f.Clusters < 1 {
		return fmt.Errorf("-clusters=%d: need at least 1 cluster", f.Clusters)
	}
	if f.Istiods != "all" && f.Istiods != "observed" {
		return fmt.Errorf("-mesh.istiods=%s: choose all or observed", f.Istiods)
	}
	if f.JoinTimeout <= 0 {
		return fmt.Errorf("-join.timeout=%s: must be positive, e.g. 2m", f.JoinTimeout)
	}
	if f.JoinSettle < 0 || f.JoinSteady < 0 {
		return fmt.Errorf("-join.settle=%s -join.steady=%s: must be 0 (by scale) or positive", f.JoinSettle, f.JoinSteady)
	}
	switch {
	case f.LatencyDuration <= 0:
		return fmt.Errorf("-latency.duration=%s: must be positive, e.g. 10s", f.LatencyDuration)
	case f.LatencyQPS < 0:
		return fmt.Errorf("-latency.qps=%g: must be positive, or 0 to find the rate this host carries", f.LatencyQPS)
	case f.LatencyConnections < 1:
		return fmt.Errorf("-latency.connections=%d: need at least 1", f.LatencyConnections)
	case f.LatencyPayload < 0:
		return fmt.Errorf("-latency.payload=%d: must be 0 or more bytes", f.LatencyPayload)
	}
	if f.XDSClients < 0 || f.XDSClients > 200 {
		return fmt.Errorf("-join.xds-clients=%d: choose 1 to 200, or 0 for the scale's default", f.XDSClients)
	}
	if err := f.Istiod.validateFor(f.Provider); err != nil {
		return err
	}
	if f.JoinSamples < 1 {
		return fmt.Errorf("-join.samples=%d: need at least 1", f.JoinSamples)
	}
	if err := f.Churn.parse(); err != nil {
		return err
	}
	if f.JoinSteady > 0 && f.JoinSettle > 0 && f.JoinSteady > f.JoinSettle {
		return fmt.Errorf("-join.steady=%s is longer than -join.settle=%s: the steady window must end at the settle point and start after convergence", f.JoinSteady, f.JoinSettle)
	}
	return nil
}
