package markdown

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
)

// setup writes the setup section: times, memory, start waves and each cluster's processes.
func setup(b *bytes.Buffer, s *report.Setup) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Setup\n\nTotal %s s.", num(s.TotalSeconds, 1))
	if s.PeakHostMemoryBytes != nil {
		p(" Peak host memory in use: %s GB.", num(*s.PeakHostMemoryBytes/1e9, 2))
	}
	if s.TestProcessPeakRSSBytes != nil {
		p(" Test process peak RSS: %s MB.", num(*s.TestProcessPeakRSSBytes/bytesPerMB, 0))
	}
	if s.APIServersReadySeconds != nil && s.CRDsEstablishedSeconds != nil {
		p(" From the start of cluster creation: every API server ready in %s s, every CRD Established in every cluster in %s s.",
			num(*s.APIServersReadySeconds, 1), num(*s.CRDsEstablishedSeconds, 1))
	}
	if s.PerClusterRSSBytes != nil {
		p(" Cluster processes per cluster: %s MB RSS (shared processes counted by their share)", num(*s.PerClusterRSSBytes/bytesPerMB, 1))
		if s.PerClusterUniqueBytes != nil {
			p(", %s MB with each binary's shared pages counted once", num(*s.PerClusterUniqueBytes/bytesPerMB, 1))
		}
		p(".")
	}
	p("\n\n")
	if w := s.Workloads; w != nil {
		if w.RestoredClusters > 0 {
			p("Scale workloads: %d of %d clusters started holding them, restored from snapshots an earlier run with the same inputs wrote (`restoredFrom` in report.json; the local provider's `-local.snapshots=false` writes them every run), all in place after %s s",
				w.RestoredClusters, len(s.Clusters), num(w.Seconds, 1))
			if w.PodsPerSecond != nil {
				p("; the others wrote theirs at %s pods/s", num(*w.PodsPerSecond, 0))
			}
		} else {
			p("Scale workloads: %s pods/s over all clusters in %s s", opt(w.PodsPerSecond, 1, 0), num(w.Seconds, 1))
		}
		p("; the client's rate limiter waited %d times (%s s)", w.ClientWaits, num(w.ClientWaitSeconds, 2))
		if w.TestProcessCPUCores != nil {
			p("; the test process used %s cores", num(*w.TestProcessCPUCores, 2))
		}
		p(".\n\n")
	}
	if c := s.Certificates; c != nil {
		p("Certificates: a ztunnel's certificate client on each of the %d fake nodes of the clusters with an istiod (%d) asked its cluster's istiod for the %d certificates of %d scale pods (one per identity per node, as ztunnel keeps them; %s s lifetimes, renewed at half) in %s s",
			c.Nodes, c.Clusters, c.Certificates, c.Pods, num(c.TTLSeconds, 0), num(c.Seconds, 1))
		if c.IstiodCPUSeconds != nil {
			p("; the istiods used %s CPU-s", num(*c.IstiodCPUSeconds, 2))
		}
		if c.TestProcessCPUCores != nil {
			p(", the test process %s cores", num(*c.TestProcessCPUCores, 2))
		}
		p("; failed requests, each retried: %d.", c.FailedRequests)
		if len(c.WithoutIstiod) > 0 {
			p(" No certificates in %s, which run no istiod (in a mesh their ztunnels would ask a primary's).", cell(strings.Join(c.WithoutIstiod, ", ")))
		}
		p("\n\n")
	}
	if w := s.WatchedOnly; w != nil {
		p("Clusters the istiod only watches (%d) were built without what nothing there reads:\n\n", w.Clusters)
		for _, c := range w.Cuts {
			p("- %s\n", c)
		}
		p("\n")
	}
	if len(s.Shared) > 0 {
		p("| Shared process | Clusters | RSS MB | Share per cluster MB | Database MB |\n|---|---|---|---|---|\n")
		for _, sp := range s.Shared {
			p("| %s | %d | %s | %s | %s |\n", cell(sp.Name), sp.Clusters, num(sp.RSSBytes/bytesPerMB, 1), num(sp.RSSBytes/float64(max(sp.Clusters, 1))/bytesPerMB, 1),
				opt(sp.DatabaseBytes, bytesPerMB, 1))
		}
		p("\n")
	}
	if len(s.StartWaves) > 0 {
		p("| Start wave | Clusters | Started s | Ready s |\n|---|---|---|---|\n")
		for i, w := range s.StartWaves {
			p("| %d | %s | %s | %s |\n", i+1, cell(strings.Join(w.Clusters, ", ")), num(w.StartSeconds, 1), num(w.ReadySeconds, 1))
		}
		p("\n")
	}
	if len(s.Clusters) > 0 {
		p("| Cluster | Ready s | RSS MB by process | CPU s by process | Pods/s | EndpointSlices | Endpoints | istiod CSRs (signed) |\n|---|---|---|---|---|---|---|---|\n")
		for _, c := range s.Clusters {
			p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", cell(c.Name), num(c.ReadySeconds, 2), cell(perKey(c.RSSBytes, bytesPerMB)), cell(perKey(c.CPUSeconds, 1)),
				podsPerSecond(c), optInt(c.EndpointSlices), optInt(c.Endpoints), csrs(c.CSRs))
		}
		p("\n")
	}
}

// podsPerSecond is a cluster's pod rate, or where its workloads were restored from.
func podsPerSecond(c report.ClusterSetup) string {
	if c.RestoredFrom != "" {
		return "restored"
	}
	return opt(c.PodsPerSecond, 1, 0)
}

// perKey lists m as "key value, ..." in key order, each value divided by scale with one decimal.
func perKey(m map[string]float64, scale float64) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+num(m[k]/scale, 1))
	}
	return strings.Join(parts, ", ")
}

// csrs is an istiod's CSR count with the certificates it signed, or "-" where none was read.
func csrs(c *report.IstiodCSRs) string {
	if c == nil {
		return missingCellValue
	}
	return fmt.Sprintf("%s (%s)", num(c.Received, 0), num(c.Issued, 0))
}

func optInt(v *int) string {
	if v == nil {
		return "-"
	}
	return strconv.Itoa(*v)
}

// plan is the run's time plan beside what each part took.
func plan(b *bytes.Buffer, pl *report.Plan) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Time plan\n\nPlanned before anything started: %s s in all", num(pl.TotalSeconds, 0))
	if pl.TimeoutSeconds != nil {
		p(" of go test's -timeout of %s s (%s s kept free for the report and teardown)", num(*pl.TimeoutSeconds, 0), opt(pl.MarginSeconds, 1, 0))
	}
	p(".\n\n| Part | Planned s | Took s | What |\n|---|---|---|---|\n")
	for _, it := range pl.Items {
		what := it.Detail
		if it.Trimmed {
			what += " (trimmed to fit)"
		}
		p("| %s | %s | %s | %s |\n", cell(it.Name), num(it.PlannedSeconds, 1), opt(it.ActualSeconds, 1, 1), cell(what))
	}
	p("\n")
	for _, w := range pl.Warnings {
		p("- %s\n", cell(w))
	}
	if len(pl.Warnings) > 0 {
		p("\n")
	}
}
