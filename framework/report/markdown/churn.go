package markdown

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/svg"
)

func churn(b *bytes.Buffer, c *report.Churn) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Churn\n\n")
	p("Pods changed in a cluster at a rate; propagation latency runs from sending the API write to the arrival, "+
		"in the test process, of the update that reflects it at a ztunnel-like delta workload-xDS client of istiod %s "+
		"(%d such client(s) connected). It includes istiod's push debounce: a push waits for PILOT_DEBOUNCE_AFTER = %s ms "+
		"without events, at most PILOT_DEBOUNCE_MAX = %s ms. Local: the pod's workload appears, disappears or changes health; "+
		"remote: the remote network's split-horizon workload of the service changes its capacity (one change in flight per "+
		"service). A replacement is two samples (old pod deleted, new pod Ready). Because a remote change waits for the previous change "+
		"of its service to show, remote writes pause while istiod debounces: remote churn cannot hold the debounce open as open-loop "+
		"local churn does, so compare the achieved rates, and read remote latencies at high rates as what this closed loop sees. Dropped: changes a window had due but did not start before it ended, every target having a change in flight (windows end on time). Lost: not reflected within %s ms, or the "+
		"final state differs from the API. Cost (CPU, pushes) covers the churn and the wait until every change showed. CPU comes from the source named in the JSON (istiodCPUSource) over that window; a value below the "+
		"resolution column is below what the source resolves. CSRs: what that istiod's CA received (and signed) over the window, "+
		"for new pods on nodes whose ztunnel held no certificate of their identity yet (a remote cluster's pods ask their own istiod). MB = 10^6 bytes.\n\n",
		cell(c.ObservedIstiod), c.Clients, num(c.Debounce.AfterMs, 0), num(c.Debounce.MaxMs, 0), num(c.LostAfterMs, 0))
	if len(c.Runs) > 0 {
		p("| Where | Mode | Rate pods/s | Achieved pods/s | %% of pods | Changes | Dropped | Samples | Lost | p50 ms | p90 ms | p99 ms | max ms | istiod CPU cores | CPU resolution cores | Pushes/s | Pushes/s by type | xDS clients | CSRs (signed) | RSS MB | Live heap MB |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range c.Runs {
			p("| %s | %s | %s | %s | %s | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				cell(r.Where), cell(r.Mode), num(r.RatePodsPerSecond, 1), num(r.AchievedPodsPerSecond, 1), opt(r.PercentOfPods, 1, 0),
				r.Changes, r.Dropped, r.Samples, r.Lost, opt(r.P50Ms, 1, 1), opt(r.P90Ms, 1, 1), opt(r.P99Ms, 1, 1), opt(r.MaxMs, 1, 1),
				cpu(r.IstiodCPUCores, r.IstiodCPUResolutionCores, 3), optRes(r.IstiodCPUResolutionCores), opt(r.PushesPerSecond, 1, 1),
				cell(byType(r.PushesPerSecondByType)), opt(r.ConnectedXDSClients, 1, 0), csrs(r.CSRs), opt(r.RSSBytes, bytesPerMB, 1), opt(r.LiveHeapBytes, bytesPerMB, 1))
		}
		p("\n")
	}
	if len(c.Knee) > 0 {
		p("### Knee\n\nThe lowest rate whose p50 exceeds twice the p50 at the lowest rate.\n\n| Where | Mode | %% of pods | Lowest rate pods/s | Its p50 ms | Knee pods/s |\n|---|---|---|---|---|---|\n")
		for _, k := range c.Knee {
			knee := "none in the sweep"
			if k.RatePodsPerSecond != nil {
				knee = num(*k.RatePodsPerSecond, 1)
			}
			p("| %s | %s | %s | %s | %s | %s |\n", cell(k.Where), cell(k.Mode), opt(k.PercentOfPods, 1, 0), num(k.BaseRate, 1), num(k.BaseP50Ms, 1), knee)
		}
		p("\n")
	}
	if f := c.Finding; f != nil {
		p("### Finding: remote endpoints that turn unready\n\n%s\n\n", strings.ReplaceAll(f.Detail, "\n", " "))
	}
	if svg.DrawsChurn(c) {
		p("![propagation latency against churn rate](%s)\n\n", svg.ChurnFile)
	}
}

func byType(m map[string]float64) string {
	if len(m) == 0 {
		return missingCellValue
	}
	return perKey(m, 1)
}
