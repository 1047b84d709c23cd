package env

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/render"
	"github.com/ambientmc/ambientmc/topology"
)

// newReport starts the run's report with what is known before anything starts, the data plane
// the provider declares among it.
func newReport(p cluster.Provider, t *topology.Topology) *report.Report {
	r := report.New(p.Name())
	r.DataPlane = p.Facts().DataPlane
	r.Istio = moduleVersion("istio.io/istio")
	r.Host = report.Host{CPUs: runtime.NumCPU(), MemoryBytes: totalMemory()}
	for _, c := range t.Clusters {
		r.Topology.Clusters = append(r.Topology.Clusters, report.TopologyCluster{Name: c.Name, Network: c.Network, Primary: c.IsPrimary()})
	}
	return r
}

// recordPlatforms puts each cluster's Istio platform, as the provider's preflight chose it, into
// the report's topology.
func recordPlatforms(e *Env) {
	pls := e.Provider.Facts().Platforms
	for i := range e.Report.Topology.Clusters {
		tc := &e.Report.Topology.Clusters[i]
		tc.Platform, tc.PlatformFrom = pls[tc.Name].Name, pls[tc.Name].From
	}
}

// setupReport records how long each cluster took to start and, for local processes, their RSS
// and CPU time and the start waves;
// a process shared by every cluster is listed once, and each cluster carries its share. Steps may
// have put figures into the setup section already (e.g. workload throughput): those stay.
func setupReport(ctx context.Context, e *Env, total time.Duration) *report.Setup {
	recordPlatforms(e) // chosen at preflight; the report is written after setup
	s := &report.Setup{TotalSeconds: total.Seconds()}
	earlier := map[string]report.ClusterSetup{}
	if prev := e.Report.Setup; prev != nil {
		s.Workloads, s.Certificates = prev.Workloads, prev.Certificates
		for _, c := range prev.Clusters {
			earlier[c.Name] = c
		}
	}
	t := e.setupTimes
	if !t.created.IsZero() && !t.apiServersReady.IsZero() {
		s.APIServersReadySeconds = report.F(t.apiServersReady.Sub(t.created).Seconds())
	}
	if !t.created.IsZero() && !t.crdsEstablished.IsZero() {
		s.CRDsEstablishedSeconds = report.F(t.crdsEstablished.Sub(t.created).Seconds())
	}
	var samples cluster.ProcessSamples
	if hp, ok := e.Provider.(cluster.HostProcesses); ok {
		samples = hp.SampleProcesses(ctx)
	}
	shares := map[string]float64{}
	if len(e.Clusters) > 0 {
		for _, p := range samples.Shared {
			if p.RSSBytes == nil {
				continue
			}
			sp := report.SharedProcess{Name: componentOf(p.Name), RSSBytes: float64(*p.RSSBytes), Clusters: len(e.Clusters)}
			if p.DatabaseBytes != nil && sp.Name == "etcd" {
				sp.DatabaseBytes = report.F(float64(*p.DatabaseBytes))
			}
			s.Shared = append(s.Shared, sp)
			shares[sp.Name+"-share"] = sp.RSSBytes / float64(len(e.Clusters))
		}
	}
	// unique counts each binary's file pages once: the page cache holds them once for all.
	var sum, unique float64
	fileMax := map[string]float64{}
	for _, c := range e.Clusters {
		prev := earlier[c.Name]
		cs := report.ClusterSetup{Name: c.Name, ReadySeconds: c.StartSeconds, PodsPerSecond: prev.PodsPerSecond,
			EndpointSlices: prev.EndpointSlices, Endpoints: prev.Endpoints, CSRs: prev.CSRs}
		add := func(k string, v float64) {
			if cs.RSSBytes == nil {
				cs.RSSBytes = map[string]float64{}
			}
			cs.RSSBytes[k] = v
			sum += v
		}
		for _, p := range samples.ByCluster[c.Name] {
			if p.RSSBytes == nil {
				continue
			}
			rss, name := *p.RSSBytes, componentOf(p.Name)
			add(name, float64(rss))
			if p.CPUSeconds != nil {
				if cs.CPUSeconds == nil {
					cs.CPUSeconds = map[string]float64{}
				}
				cs.CPUSeconds[name] = *p.CPUSeconds
			}
			var file uint64
			if p.RSSFileBytes != nil {
				file = *p.RSSFileBytes
			}
			unique += float64(rss - min(file, rss))
			fileMax[name] = max(fileMax[name], float64(file))
		}
		for k, v := range shares {
			add(k, v)
		}
		s.Clusters = append(s.Clusters, cs)
	}
	s.WatchedOnly = watchedOnlySetup(e)
	for _, w := range e.Provider.Facts().StartWaves {
		s.StartWaves = append(s.StartWaves, report.StartWave{Clusters: w.Clusters, StartSeconds: w.Start.Seconds(), ReadySeconds: w.Ready.Seconds()})
	}
	if len(e.Clusters) > 0 && sum > 0 {
		s.PerClusterRSSBytes = report.F(sum / float64(len(e.Clusters)))
		for _, f := range fileMax {
			unique += f
		}
		for _, sp := range s.Shared {
			unique += sp.RSSBytes
		}
		s.PerClusterUniqueBytes = report.F(unique / float64(len(e.Clusters)))
	}
	return s
}

// watchedOnlySetup lists the cuts made in clusters the run's only istiod merely watches, where
// the provider builds them lighter (Facts.WatchedOnlyCuts): their CRDs (crdsFor) and what the
// provider leaves out. Nil where there are none.
func watchedOnlySetup(e *Env) *report.WatchedOnlySetup {
	cuts := e.Provider.Facts().WatchedOnlyCuts
	if cuts == nil {
		return nil
	}
	w := &report.WatchedOnlySetup{Cuts: append([]string{"CRDs: every one present, only " + strings.Join(crds.ServedWhereNoIstiod(), ", ") +
		" served; the others with the smallest schema"}, cuts...)}
	for _, c := range e.Clusters {
		if e.WatchedOnly(c.Name) {
			w.Clusters++
		}
	}
	if w.Clusters == 0 {
		return nil
	}
	return w
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

func (e *Env) writeReport() error {
	if err := os.MkdirAll(e.ReportDir, 0o755); err != nil {
		return err
	}
	if e.peakMemory != nil && e.Report.Setup != nil {
		if peak := e.peakMemory.Peak(); peak > 0 {
			e.Report.Setup.PeakHostMemoryBytes = report.F(float64(peak))
		}
	}
	var self syscall.Rusage
	if e.Report.Setup != nil && syscall.Getrusage(syscall.RUSAGE_SELF, &self) == nil && self.Maxrss > 0 {
		e.Report.Setup.TestProcessPeakRSSBytes = report.F(float64(self.Maxrss) * 1024) // Linux reports KiB
	}
	if err := render.Write(e.ReportDir, e.Report); err != nil {
		return err
	}
	e.Statusf("report written to %s", e.ReportDir)
	return nil
}

// ArtifactsEnv is prow's convention for where a job's files go.
const ArtifactsEnv = "ARTIFACTS"

// ReportDir is -report-dir, else $ARTIFACTS, else a new directory under the temp dir.
func ReportDir(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if a := os.Getenv(ArtifactsEnv); a != "" {
		return a, os.MkdirAll(a, 0o755)
	}
	// Unique per run: two runs started in the same second must not share a directory.
	base := filepath.Join(os.TempDir(), "ambientmc-reports")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(base, time.Now().Format("20060102-150405")+"-")
}

// dropEmptyReportDir removes the report directory this run made under the temp dir when nothing was
// written to it (a run refused before it started leaves nothing behind); writeReport makes it again
// if a report comes after all.
func (e *Env) dropEmptyReportDir() error {
	if entries, err := os.ReadDir(e.ReportDir); err != nil || len(entries) > 0 {
		return nil
	}
	return os.Remove(e.ReportDir)
}

// WriteReport writes the report's files into the report directory.
func (e *Env) WriteReport() error { return e.writeReport() }
