package bench

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/ambientmc/ambientmc/framework/report"
)

// benchChurn writes one line per churn window: BenchmarkChurn/where=.../mode=.../rate=...
func benchChurn(b *bytes.Buffer, clusters int, c *report.Churn) {
	if c == nil {
		return
	}
	for _, r := range c.Runs {
		name := fmt.Sprintf("BenchmarkChurn/clusters=%d/where=%s/mode=%s/rate=%s", clusters, token(r.Where), token(r.Mode),
			strconv.FormatFloat(r.RatePodsPerSecond, 'f', -1, 64))
		if r.PercentOfPods != nil {
			name += "/percent=" + strconv.FormatFloat(*r.PercentOfPods, 'f', -1, 64)
		}
		ms := optMetrics(optMetric{r.P50Ms, "p50-ms"}, optMetric{r.P90Ms, "p90-ms"}, optMetric{r.P99Ms, "p99-ms"}, optMetric{r.MaxMs, "max-ms"},
			optMetric{r.IstiodCPUCores, "istiod-cpu-cores"}, optMetric{r.PushesPerSecond, "pushes/s"},
			optMetric{r.RSSBytes, "rss-B"}, optMetric{r.LiveHeapBytes, "live-heap-B"})
		ms = append(ms, metric{float64(r.Lost), "lost"}, metric{float64(r.Samples), "samples"}, metric{r.AchievedPodsPerSecond, "achieved-pods/s"})
		for _, t := range slices.Sorted(maps.Keys(r.PushesPerSecondByType)) {
			if v := r.PushesPerSecondByType[t]; !math.IsNaN(v) {
				ms = append(ms, metric{v, token(t) + "-pushes/s"})
			}
		}
		line(b, name, ms...)
	}
}
