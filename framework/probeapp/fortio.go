package probeapp

import (
	"fortio.org/fortio/fhttp"
	"fortio.org/fortio/periodic"
	"github.com/ambientmc/ambientmc/framework/probe"
)

// FortioOptions turns a load into fortio's runner options against url. Every provider drives
// fortio with these, in process or through a client pod's REST API.
func FortioOptions(url string, l probe.Load) *fhttp.HTTPRunnerOptions {
	o := &fhttp.HTTPRunnerOptions{}
	o.QPS = l.QPS
	o.Duration = l.Duration
	o.NumThreads = l.Connections
	o.Percentiles = []float64{50, 90, 99}
	// The default 1 ms buckets would quantise sub-millisecond latencies.
	o.RunnerOptions.Resolution = 1e-5
	// Spread the connections' schedules over the period: in lockstep, all of them open a
	// connection at the same instant and the latency measures that burst's queueing.
	o.Uniform = true
	o.URL = url
	o.DisableKeepAlive = l.NewConnections
	// A run given its own aborter leaves signals alone: without one, fortio catches SIGINT for the
	// run and afterwards resets SIGINT's handling (periodic.go), which removes the framework's
	// Ctrl-C handler, so a later Ctrl-C would skip the teardown.
	o.Stop = periodic.NewAborter()
	return o
}

// FortioResult turns fortio's results into the framework's.
func FortioResult(res *fhttp.HTTPRunnerResults, connections int) *probe.LoadResult {
	h := res.DurationHistogram
	r := &probe.LoadResult{
		QPS: res.ActualQPS, DurationSeconds: res.ActualDuration.Seconds(),
		Requests: h.Count, OK: res.RetCodes[200], AvgSeconds: h.Avg,
		Percentiles: map[float64]float64{}, Warmups: int64(connections), HostCPUBusy: -1,
	}
	for _, p := range []float64{50, 90, 99} {
		r.Percentiles[p] = h.CalcPercentile(p)
		for _, v := range h.Percentiles {
			if v.Percentile == p {
				r.Percentiles[p] = v.Value
			}
		}
	}
	return r
}
