// Package latency is how the latency suite loads the probe path: the highest request rate this
// host carries (Search), and one fortio run turned into a report row (Run).
package latency

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
)

// Loader runs fortio from the probe client (probe.Env).
type Loader interface {
	Load(ctx context.Context, l probe.Load) (*probe.LoadResult, error)
}

// The rate search: probe steps at rising rates of the most demanding path (cross-cluster, a new
// connection per request), keeping the highest rate at which host CPU stayed under carriedCPU
// and at least carriedShare of the requested rate got through.
const (
	carriedCPU   = 0.7
	carriedShare = 0.98
	probeStep    = 2 * time.Second
)

// Rates are the rates the search tries, up to Istio's benchmark default of 1000 QPS; where the
// first is not carried (kind clusters on a small host), it tries Below, falling.
var (
	Rates = []float64{50, 100, 200, 400, 700, 1000}
	Below = []float64{20, 10}
)

// Carried is the share of the requested rate a run achieved, against what fortio achieves when
// nothing holds it back. With n connections fortio plans k = floor(rate·d/n) calls per connection
// (dropping the remainder), spaced so the k-th starts at k/(rate/n), and with its uniform schedule
// starts connection j (n-1-j)/n of a spacing late; so an unhindered run takes (k + (n-1)/n)·n/rate
// and reaches rate·k/(k + (n-1)/n) (docs/measurements.md#why-the-settings-are-what-they-are).
func Carried(achieved, rate float64, d time.Duration, connections int) float64 {
	n := float64(connections)
	k := math.Floor(rate * d.Seconds() / n)
	if k < 1 {
		return 0
	}
	return achieved / (rate * k / (k + (n-1)/n))
}

// Search finds the highest rate of Rates this host carries on app's path (named path), new
// connections: each step is accepted while no request failed, the rate got through (Carried) and
// host CPU stayed under carriedCPU. When not even Rates' first is carried it tries Below, falling,
// and settles on the first carried (or Below's last). x's Logf receives one line per step.
func Search(ctx context.Context, x *expctx.Context, l Loader, app, path string) (*report.RateSearch, error) {
	o, logf := x.Flags.Latency, x.Logf
	rs := &report.RateSearch{Rule: fmt.Sprintf("%s steps of %s new connections, rising from %g QPS (falling to %g where that is not carried); accepted while host CPU < %.0f%% and at least %.0f%% of the rate got through",
		probeStep, path, Rates[0], Below[len(Below)-1], 100*carriedCPU, 100*carriedShare)}
	step := func(rate float64) (bool, error) {
		res, err := l.Load(ctx, probe.Load{App: app, NewConnections: true, QPS: rate, Duration: probeStep, Connections: o.Connections, Payload: o.Payload})
		if err != nil {
			return false, fmt.Errorf("rate probe at %g QPS: %w", rate, err)
		}
		st := report.RateStep{QPS: rate, AchievedQPS: res.QPS, HostCPUBusy: max(res.HostCPUBusy, 0), Accepted: true}
		carried := Carried(res.QPS, rate, probeStep, o.Connections)
		switch {
		case res.OK < res.Requests:
			st.Accepted, st.Reason = false, fmt.Sprintf("%d of %d requests failed", res.Requests-res.OK, res.Requests)
		case carried < carriedShare:
			st.Accepted, st.Reason = false, fmt.Sprintf("only %.0f%% of the rate got through", 100*carried)
		case res.HostCPUBusy >= carriedCPU:
			st.Accepted, st.Reason = false, fmt.Sprintf("host CPU %.0f%% busy", 100*res.HostCPUBusy)
		}
		rs.Steps = append(rs.Steps, st)
		logf("latency: rate probe %4.0f QPS: achieved %.1f, host CPU %.0f%%, accepted %t %s", rate, res.QPS, 100*st.HostCPUBusy, st.Accepted, st.Reason)
		return st.Accepted, nil
	}
	for _, rate := range Rates {
		ok, err := step(rate)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		rs.QPS = rate
	}
	for _, rate := range Below {
		if rs.QPS != 0 {
			break
		}
		ok, err := step(rate)
		if err != nil {
			return nil, err
		}
		if ok {
			rs.QPS = rate
		}
	}
	if rs.QPS == 0 {
		// Not even the lowest rate was carried: run at it, and the runs will say they were saturated.
		rs.QPS = Below[len(Below)-1]
	}
	return rs, nil
}

// Run drives one fortio run of load at rate (new connections when conns says so) and turns its
// result into a report row for path, as x's latency flags say (-latency.duration, -connections,
// -payload; -latency.floor-duration for a run straight at the server).
func Run(ctx context.Context, x *expctx.Context, l Loader, rate float64, load probe.Load, path, conns string) (report.LatencyRun, error) {
	o := x.Flags.Latency
	load.Duration, load.Connections, load.Payload = o.Duration, o.Connections, o.Payload
	if load.Direct {
		load.Duration = o.FloorDuration
	}
	load.NewConnections, load.QPS = conns == report.ConnNew, rate
	res, err := l.Load(ctx, load)
	if err != nil {
		return report.LatencyRun{}, fmt.Errorf("fortio %s %s: %w", path, conns, err)
	}
	ms := func(s float64) float64 { return s * 1e3 }
	return report.LatencyRun{
		Path: path, Connections: conns, QPS: res.QPS, DurationSeconds: res.DurationSeconds,
		Requests: res.Requests, Errors: res.Requests - res.OK,
		AvgMs: ms(res.AvgSeconds), P50Ms: ms(res.Percentiles[50]), P90Ms: ms(res.Percentiles[90]), P99Ms: ms(res.Percentiles[99]),
		HostCPUBusy: max(res.HostCPUBusy, 0), // 0: not measured (absent)
	}, nil
}

// Starved says a run at rate measured a saturated host rather than the mesh: the host was above
// measure.HostSaturated busy, or the run fell short of the rate (Carried).
func Starved(r report.LatencyRun, rate float64, connections int) bool {
	return r.HostCPUBusy > measure.HostSaturated || Carried(r.QPS, rate, time.Duration(r.DurationSeconds*float64(time.Second)), connections) < carriedShare
}
