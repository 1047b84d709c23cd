// Package markdown writes a report as report.md: its sections as tables, with the published
// figures beside the measured ones and links to the charts package svg draws.
package markdown

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
)

// File is the name of the Markdown report in a report directory.
const File = "report.md"

// EmulatedNote is printed in report.md whenever the latency comes from the emulated data plane.
const EmulatedNote = "Data-plane latency here is from the emulated Go data plane, not ztunnel: no ztunnel or Envoy code " +
	"(HBONE, double HBONE, routing and ztunnel's L4 authorization are the project's own), no waypoint on the path."

// EmulatedOnKindNote says what around the emulated data plane is real on kind.
const EmulatedOnKindNote = "On kind it runs as Istio's ztunnel DaemonSet and east-west gateway, behind istio-cni's in-pod " +
	"capture, kube-proxy, the CNI, MetalLB and the Docker network, all real."

const (
	bytesPerMB       = 1e6 // decimal MB, as the published 180 MB (180000000 bytes)
	missingCellValue = "-"
)

// Render renders r as report.md.
func Render(r *report.Report) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	title := "# ambientmc report: " + r.Provider + " provider"
	if r.DataPlane != "" {
		title += ", " + r.DataPlane + " data plane"
	}
	p("%s\n\n", title)
	if r.DataPlane == report.DataPlaneEmulated {
		p("%s\n\n", EmulatedNote)
		if r.Provider == report.ProviderKind {
			p("%s\n\n", EmulatedOnKindNote)
		}
	}

	p("| | |\n|---|---|\n")
	if r.Istio != "" {
		p("| Istio | %s |\n", cell(r.Istio))
	}
	if i := r.Istiod; i != nil {
		p("| istiod | %s |\n", cell(istiodLine(i)))
	}
	if r.Kubernetes != "" {
		p("| Kubernetes | %s |\n", cell(r.Kubernetes))
	}
	if r.NodeImage != "" {
		p("| Node image | %s |\n", cell(r.NodeImage))
	}
	p("| Host | %d CPUs, %.1f GB memory |\n", r.Host.CPUs, float64(r.Host.MemoryBytes)/1e9)
	if r.Scale != nil {
		p("| Scale | %d services, %d pods per cluster |\n", r.Scale.ServicesPerCluster, r.Scale.PodsPerCluster)
	}
	p("| Clusters | %d |\n\n", len(r.Topology.Clusters))

	if len(r.Topology.Clusters) > 0 {
		p("## Topology\n\n| Cluster | Network | Primary |\n|---|---|---|\n")
		for _, c := range r.Topology.Clusters {
			p("| %s | %s | %t |\n", cell(c.Name), cell(c.Network), c.Primary)
		}
		p("\n")
	}

	gates(&b, r.Gates)
	if cp := r.ControlPlane; cp != nil {
		controlPlane(&b, cp, r.Scale, r.Reference, r.Setup)
	}
	if l := r.Latency; l != nil {
		latency(&b, l, r.Reference, r.DataPlane)
	}

	if f := r.Failover; f != nil {
		p("## Failover\n\n| Service | To | Relation | Failover s | Failback s | Requests | Failed |\n|---|---|---|---|---|---|---|\n")
		p("| %s | %s | %s | %s | %s | %d | %d |\n\n", cell(f.Service), cell(f.Target), cell(f.Relation), num(f.FailoverSeconds, 2), num(f.FailbackSeconds, 2), f.Requests, f.FailedRequests)
	}
	if len(r.IstioImages) > 0 {
		fmt.Fprintf(&b, "## Istio images\n\n| Cluster | Component | Image | Resolved as |\n|---|---|---|---|\n")
		for _, im := range r.IstioImages {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(im.Cluster), cell(im.Component), cell(im.Image), cell(im.ImageID))
		}
		b.WriteString("\n")
	}
	checks(&b, r.IstiodChecks)
	controls(&b, r.IstiodCheckControls)
	profiles(&b, r.Profiles)
	if r.Churn != nil {
		churn(&b, r.Churn)
	}
	if r.Setup != nil {
		setup(&b, r.Setup)
	}

	if r.Plan != nil {
		plan(&b, r.Plan)
	}
	if len(r.Warnings) > 0 {
		p("## Warnings\n\n")
		for _, w := range r.Warnings {
			p("- %s\n", strings.ReplaceAll(w, "\n", " "))
		}
		p("\n")
	}
	return b.Bytes()
}

// istiodLine names the istiod that ran: version (or "binary"), path, short sha256, replaced pins.
func istiodLine(i *report.IstiodBuild) string {
	what := "binary"
	if i.Version != "" {
		what = i.Version
	}
	sha := i.SHA256
	if len(sha) > 12 {
		sha = sha[:12]
	}
	out := fmt.Sprintf("%s (%s, sha256 %s", what, i.Binary, sha)
	if i.GoVersion != "" {
		out += ", " + i.GoVersion
	}
	out += ")"
	if len(i.ReplacedPins) > 0 {
		out += "; replaced pins: " + strings.Join(i.ReplacedPins, "; ")
	}
	return out
}
