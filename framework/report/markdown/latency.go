package markdown

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/svg"
)

func latency(b *bytes.Buffer, l *report.Latency, ref report.Reference, dataPlane string) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Latency\n\n")
	if l.HostCPUSaturated {
		p("**The host CPUs were saturated during the runs; the latencies include waiting for CPU.**\n\n")
	}
	table := func(runs []report.LatencyRun) {
		p("| Path | Connections | QPS | Duration s | Requests | Errors | Avg ms | p50 ms | p90 ms | p99 ms | Host CPU busy |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range runs {
			busy := missingCellValue
			if r.HostCPUBusy > 0 {
				busy = num(r.HostCPUBusy*100, 0) + "%"
			}
			p("| %s | %s | %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", cell(r.Path), cell(r.Connections), qps(r.QPS),
				num(r.DurationSeconds, 1), r.Requests, r.Errors, num(r.AvgMs, 3), num(r.P50Ms, 3), num(r.P90Ms, 3), num(r.P99Ms, 3), busy)
		}
		p("\n")
	}
	if rs := l.RateSearch; rs != nil {
		if rs.Forced {
			p("Request rate: %s QPS, forced by -latency.qps.\n\n", qps(rs.QPS))
		} else {
			p("Request rate: %s QPS, the highest this host carried in the probe steps below (%s).\n\n", qps(rs.QPS), rs.Rule)
			p("| Requested QPS | Achieved QPS | Host CPU busy | Accepted | Why |\n|---|---|---|---|---|\n")
			for _, st := range rs.Steps {
				busy := missingCellValue
				if st.HostCPUBusy > 0 {
					busy = num(st.HostCPUBusy*100, 0) + "%"
				}
				p("| %s | %s | %s | %t | %s |\n", qps(st.QPS), qps(st.AchievedQPS), busy, st.Accepted, cell(st.Reason))
			}
			p("\n")
		}
	}
	if len(l.Runs) > 0 {
		table(l.Runs)
	}
	if o := l.Overhead; o != nil && l.HostCPUSaturated {
		// A saturated host's latency is not the mesh's: never beside the published figures.
		p("### Overhead\n\nCross-cluster minus local, on average latency. Not comparable with the published figures: the host was saturated.\n\n| Connections | Measured |\n|---|---|\n")
		p("| new | %s |\n", delta(o.New))
		p("| reused | %s |\n\n", delta(o.Reused))
	} else if o != nil {
		p("### Overhead\n\nCross-cluster minus local, on average latency.%s\n\n| Connections | Measured (%s) | Published (ztunnel, Envoy) |\n|---|---|---|\n",
			emulatedBeside(dataPlane), dataPlaneName(dataPlane))
		p("| new | %s | %s |\n", delta(o.New), delta(&report.Delta{DeltaMs: ref.NewConnOverheadMs, Percent: ref.NewConnOverheadPercent}))
		p("| reused | %s | %s |\n\n", delta(o.Reused), delta(&report.Delta{DeltaMs: ref.ReusedConnOverheadMs, Percent: ref.ReusedConnOverheadPercent}))
	}
	if o := l.SameNetworkOverhead; o != nil {
		p("### Same-network overhead\n\nAnother cluster on the client's network (single HBONE, no gateway) minus local, on average latency; the published figures cover only the other network's path.\n\n| Connections | Measured |\n|---|---|\n")
		p("| new | %s |\n", delta(o.New))
		p("| reused | %s |\n\n", delta(o.Reused))
	}
	if len(l.HarnessFloor) > 0 {
		p("### Harness floor\n\nFortio client straight to the server, no data plane: the latency the harness itself adds.\n\n")
		table(l.HarnessFloor)
	}
	if svg.DrawsLatency(l) {
		p("![latency by path and connection mode](%s)\n\n", svg.LatencyFile)
	}
}

func delta(d *report.Delta) string {
	if d == nil || !finite(d.DeltaMs) || !finite(d.Percent) {
		return missingCellValue
	}
	return fmt.Sprintf("%+.2f ms (%+.0f%%)", d.DeltaMs, d.Percent)
}

func qps(v float64) string {
	if !finite(v) {
		return missingCellValue
	}
	if v == 0 {
		return "max"
	}
	// Measured rates have many digits; one decimal is all a reader needs.
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// dataPlaneName names the data plane a measured latency came from, beside a published one.
func dataPlaneName(dataPlane string) string {
	if dataPlane == "" {
		return "data plane not stated"
	}
	return dataPlane + " data plane"
}

// emulatedBeside says, where the emulated data plane's overhead stands beside the published
// figure, what differs between the two.
func emulatedBeside(dataPlane string) string {
	if dataPlane != report.DataPlaneEmulated {
		return ""
	}
	return " The measured column is the emulated Go data plane's (the project's HBONE and double HBONE, no ztunnel or Envoy code); the published one is real ztunnel and Envoy."
}
