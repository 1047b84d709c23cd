package env

import (
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/topology"
)

// newReport starts the run's report with what is known before anything starts.
func newReport(provider string, t *topology.Topology) *report.Report {
	r := report.New(provider)
	r.Istio = moduleVersion("istio.io/istio")
	r.Host = report.Host{CPUs: runtime.NumCPU(), MemoryBytes: totalMemory()}
	for _, c := range t.Clusters {
		r.Topology.Clusters = append(r.Topology.Clusters, report.TopologyCluster{Name: c.Name, Network: c.Network, Primary: c.IsPrimary()})
	}
	return r
}

// processLister is implemented by providers that run cluster components as local processes.
type processLister interface {
	Processes() map[string][]*proc.Process
}

// setupReport records how long each cluster took to start and, for local processes, their RSS.
// Steps may have put figures into the setup section already (e.g. workload throughput): those stay.
func setupReport(e *Env, total time.Duration) *report.Setup {
	s := &report.Setup{TotalSeconds: total.Seconds()}
	earlier := map[string]report.ClusterSetup{}
	if prev := e.Report.Setup; prev != nil {
		s.Workloads = prev.Workloads
		for _, c := range prev.Clusters {
			earlier[c.Name] = c
		}
	}
	var procs map[string][]*proc.Process
	if pl, ok := e.Provider.(processLister); ok {
		procs = pl.Processes()
	}
	for _, c := range e.Clusters {
		cs := report.ClusterSetup{Name: c.Name, ReadySeconds: c.StartSeconds, PodsPerSecond: earlier[c.Name].PodsPerSecond}
		for _, p := range procs[c.Name] {
			if rss, err := p.RSSBytes(); err == nil {
				if cs.RSSBytes == nil {
					cs.RSSBytes = map[string]float64{}
				}
				cs.RSSBytes[componentOf(p.Name())] = float64(rss)
			}
		}
		s.Clusters = append(s.Clusters, cs)
	}
	return s
}

// componentOf turns "cluster-1/kube-apiserver" into "kube-apiserver".
func componentOf(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// moduleVersion is the version of a module linked into this binary, as pinned in go.mod.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range info.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return ""
}

func totalMemory() uint64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
