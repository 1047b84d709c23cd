package multicluster

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// trafficLoop sends one request every interval on a fresh connection and counts the outcomes.
type trafficLoop struct {
	sent, failed atomic.Int64
	stop         chan struct{}
	done         chan struct{}
}

func startTraffic(url string, interval time.Duration) *trafficLoop {
	l := &trafficLoop{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			l.sent.Add(1)
			resp, err := client.Get(url)
			if err != nil {
				l.failed.Add(1)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				l.failed.Add(1)
			}
		}
	}()
	return l
}

func (l *trafficLoop) Stop() { close(l.stop); <-l.done }

// waitFor polls cond every 20 ms and returns how long it took to hold.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestFailover: echo-failover has endpoints in both clusters and PreferClose, so from the client's
// cluster traffic stays local. When the local endpoint turns unready (a status write, as a kubelet
// would do), istiod marks it unhealthy and traffic moves to the remote cluster through the
// gateway; when it recovers, traffic returns.
func TestFailover(t *testing.T) {
	p := dataPlane(t)
	ctx := context.Background()
	localPod, ok := p.probes.Server(workload.EchoFailover, p.local.Name)
	require.True(t, ok)
	local := p.echo(p.local, localPod.Name)
	remote := p.echo(p.remote, workload.EchoFailover+"-0")
	gw := p.gateways[p.remote.Name]

	loop := startTraffic(p.url(workload.EchoFailover), 10*time.Millisecond)
	defer loop.Stop()

	// Steady state: everything stays in the client's cluster.
	remoteBefore, gwBefore, localBefore := remote.Requests.Load(), gw.Forwarded.Load(), local.Requests.Load()
	time.Sleep(time.Second)
	require.Positive(t, local.Requests.Load()-localBefore, "traffic reaches the local endpoint")
	assert.Equal(t, remoteBefore, remote.Requests.Load(), "with a healthy local endpoint nothing crosses to %s", p.remote.Name)
	assert.Equal(t, gwBefore, gw.Forwarded.Load(), "and nothing goes through the gateway")

	sentBefore, failedBefore := loop.sent.Load(), loop.failed.Load()
	require.NoError(t, workload.SetReady(ctx, localPod, false))
	remoteAt := remote.Requests.Load()
	failover := waitFor(t, "traffic moves to "+p.remote.Name, 30*time.Second, func() bool { return remote.Requests.Load() > remoteAt+5 })
	// Once moved, nothing reaches the unready local endpoint any more.
	localAt := local.Requests.Load()
	gwAt := gw.Forwarded.Load()
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, localAt, local.Requests.Load(), "no traffic to the unready local endpoint")
	assert.Greater(t, gw.Forwarded.Load(), gwAt, "failed-over traffic rides the remote gateway")

	require.NoError(t, workload.SetReady(ctx, localPod, true))
	localAt = local.Requests.Load()
	failback := waitFor(t, "traffic returns to "+p.local.Name, 30*time.Second, func() bool { return local.Requests.Load() > localAt+5 })
	remoteAt = remote.Requests.Load()
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, remoteAt, remote.Requests.Load(), "after recovery nothing crosses any more")

	sent, failed := loop.sent.Load()-sentBefore, loop.failed.Load()-failedBefore
	mc.Logf("failover: moved to %s in %.2fs, back in %.2fs; %d of %d requests failed during the switch",
		p.remote.Name, failover.Seconds(), failback.Seconds(), failed, sent)
	// Bounded, not zero: requests in flight while istiod pushes the change may fail.
	assert.LessOrEqual(t, failed, sent/10+5, "failed requests during the switch stay bounded")
	mc.Report.Failover = &report.Failover{
		Service: workload.EchoFailover, FailoverSeconds: failover.Seconds(), FailbackSeconds: failback.Seconds(),
		Requests: sent, FailedRequests: failed,
	}
}
