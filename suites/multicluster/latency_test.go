package multicluster

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"

	"fortio.org/fortio/fhttp"
	"fortio.org/fortio/periodic"
	fortiolog "fortio.org/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// saturated is the host CPU share above which latencies say more about the machine than the mesh.
const saturated = 0.9

// fortioRun drives fortio at url and turns its histogram into a report row.
func fortioRun(t *testing.T, url, path, conns string) report.LatencyRun {
	t.Helper()
	fortiolog.SetLogLevelQuiet(fortiolog.Error)
	before, err := measure.ReadHostCPU()
	require.NoError(t, err)
	res, err := fhttp.RunHTTPTest(&fhttp.HTTPRunnerOptions{
		RunnerOptions: periodic.RunnerOptions{
			QPS:         mc.Flags.LatencyQPS,
			Duration:    mc.Flags.LatencyDuration,
			NumThreads:  mc.Flags.LatencyConnections,
			Percentiles: []float64{50, 90, 99},
			// The default 1 ms buckets would quantise sub-millisecond latencies.
			Resolution: 1e-5,
			Out:        io.Discard,
			Labels:     path + "-" + conns,
			// Spread the connections' schedules over the period: in lockstep, all of them open a
			// connection at the same instant and the latency measures that burst's queueing.
			Uniform: true,
		},
		HTTPOptions: fhttp.HTTPOptions{
			URL:              url + "?size=" + strconv.Itoa(mc.Flags.LatencyPayload),
			DisableKeepAlive: conns == report.ConnNew,
		},
	})
	require.NoError(t, err, "fortio %s %s", path, conns)
	after, err := measure.ReadHostCPU()
	require.NoError(t, err)
	h := res.DurationHistogram
	pct := func(p float64) float64 {
		for _, v := range h.Percentiles {
			if v.Percentile == p {
				return v.Value * 1e3
			}
		}
		return h.CalcPercentile(p) * 1e3
	}
	run := report.LatencyRun{
		Path: path, Connections: conns, QPS: res.ActualQPS, DurationSeconds: res.ActualDuration.Seconds(),
		Requests: h.Count, Errors: h.Count - res.RetCodes[200],
		AvgMs: h.Avg * 1e3, P50Ms: pct(50), P90Ms: pct(90), P99Ms: pct(99),
		HostCPUBusy: after.BusySince(before),
	}
	mc.Logf("latency: %-13s %-6s %6d requests, %d errors, avg %.3f ms, p50 %.3f, p90 %.3f, p99 %.3f ms, host CPU %.0f%%",
		path, conns, run.Requests, run.Errors, run.AvgMs, run.P50Ms, run.P90Ms, run.P99Ms, 100*run.HostCPUBusy)
	return run
}

// warmups is the number of extra calls fortio makes: one per connection before the run starts.
func warmups() int64 { return int64(mc.Flags.LatencyConnections) }

// TestLatency reproduces the data-plane half of Istio's published numbers: the same client calls a
// service in its own cluster (HBONE, one hop) and one in another network (double HBONE through the
// remote east-west gateway), with a new connection per request and with reused connections. It
// also runs fortio straight at the echo server to show the harness's own floor. Every request
// must succeed and take the expected path.
func TestLatency(t *testing.T) {
	p := dataPlane(t)
	localEcho := p.echo(p.local, workload.EchoLocal+"-0")
	remoteEcho := p.echo(p.remote, workload.EchoRemote+"-0")
	remoteGW := p.gateways[p.remote.Name]
	localGW := p.gateways[p.local.Name]
	lat := &report.Latency{}

	for _, conns := range []string{report.ConnNew, report.ConnReused} {
		t.Run("direct/"+conns, func(t *testing.T) {
			srv, _ := p.probes.Server(workload.EchoLocal, p.local.Name)
			run := fortioRun(t, "http://"+net.JoinHostPort(srv.IP.String(), strconv.Itoa(workload.EchoPort))+"/echo", report.PathDirect, conns)
			assert.Zero(t, run.Errors)
			lat.HarnessFloor = append(lat.HarnessFloor, run)
		})
		t.Run("local/"+conns, func(t *testing.T) {
			echoBefore, gwBefore := localEcho.Requests.Load(), remoteGW.Forwarded.Load()+localGW.Forwarded.Load()
			inBefore := p.serverZ[p.local.Name].Stats.Inbound.Load()
			run := fortioRun(t, p.url(workload.EchoLocal), report.PathLocal, conns)
			require.Positive(t, run.Requests)
			assert.Zero(t, run.Errors, "every request succeeds")
			assert.Equal(t, run.Requests+warmups(), localEcho.Requests.Load()-echoBefore, "every request (and fortio's warm-up call per connection) reached echo-local")
			assert.Equal(t, gwBefore, remoteGW.Forwarded.Load()+localGW.Forwarded.Load(), "same-cluster traffic never touches a gateway")
			assert.Positive(t, p.serverZ[p.local.Name].Stats.Inbound.Load()-inBefore, "it arrived through the destination node's ztunnel")
			lat.Runs = append(lat.Runs, run)
		})
		t.Run("cross-cluster/"+conns, func(t *testing.T) {
			echoBefore, gwBefore := remoteEcho.Requests.Load(), remoteGW.Forwarded.Load()
			viaGW := p.serverZ[p.remote.Name].Stats.InboundViaGateway.Load()
			run := fortioRun(t, p.url(workload.EchoRemote), report.PathCrossCluster, conns)
			require.Positive(t, run.Requests)
			assert.Zero(t, run.Errors, "every request succeeds")
			assert.Equal(t, run.Requests+warmups(), remoteEcho.Requests.Load()-echoBefore, "every request (and fortio's warm-up call per connection) reached echo-remote")
			tunnels := remoteGW.Forwarded.Load() - gwBefore
			assert.Positive(t, tunnels, "cross-cluster traffic goes through the remote gateway")
			assert.Equal(t, tunnels, p.serverZ[p.remote.Name].Stats.InboundViaGateway.Load()-viaGW,
				"every tunnel the gateway forwarded arrived at the remote ztunnel with a hostname authority")
			if conns == report.ConnNew {
				assert.Equal(t, run.Requests+warmups(), tunnels, "a new connection per request is a new tunnel per request")
			} else {
				assert.Equal(t, int64(mc.Flags.LatencyConnections), tunnels, "reused connections keep one tunnel each")
			}
			lat.Runs = append(lat.Runs, run)
		})
	}
	lat.Overhead = report.ComputeOverhead(lat.Runs)
	for _, r := range append(append([]report.LatencyRun{}, lat.Runs...), lat.HarnessFloor...) {
		if r.HostCPUBusy > saturated {
			lat.HostCPUSaturated = true
		}
	}
	if lat.HostCPUSaturated {
		mc.Report.Warnings = append(mc.Report.Warnings, fmt.Sprintf(
			"host CPU was above %.0f%% busy during latency runs: these latencies measure a saturated %d-core machine, not the mesh; lower -latency.qps",
			100*saturated, mc.Report.Host.CPUs))
	}
	mc.Report.Latency = lat
	if o := lat.Overhead; o != nil {
		for name, d := range map[string]*report.Delta{"new": o.New, "reused": o.Reused} {
			if d != nil {
				mc.Logf("latency: cross-cluster overhead, %s connections: +%.3f ms (%+.0f%%) [published: new +2.2 ms (+346%%), reused +0.13 ms (+72%%)]", name, d.DeltaMs, d.Percent)
			}
		}
	}
	require.NotNil(t, lat.Overhead, "overhead computed for both connection modes")
	assert.NotNil(t, lat.Overhead.New)
	assert.NotNil(t, lat.Overhead.Reused)
}
