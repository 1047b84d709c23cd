package multicluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/topology"
)

// trafficLoop sends one request every interval on a fresh connection and records who served it.
type trafficLoop struct {
	interval time.Duration
	mu       sync.Mutex
	answers  []answer
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// answer is one request's outcome: when it was answered and by which cluster ("" if it failed).
type answer struct {
	at       time.Time
	servedBy string
}

func startTraffic(ctx context.Context, p *probeEnv, app string, interval time.Duration) *trafficLoop {
	l := &trafficLoop{interval: interval, stop: make(chan struct{}), done: make(chan struct{})}
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
			by, err := p.Request(ctx, app)
			if err != nil {
				by = ""
			}
			l.mu.Lock()
			l.answers = append(l.answers, answer{time.Now(), by})
			l.mu.Unlock()
		}
	}()
	return l
}

// Stop ends the loop and waits for its last request; it may be called again.
func (l *trafficLoop) Stop() { l.stopOnce.Do(func() { close(l.stop) }); <-l.done }

// since returns the answers received after t.
func (l *trafficLoop) since(t time.Time) []answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []answer
	for _, a := range l.answers {
		if a.at.After(t) {
			out = append(out, a)
		}
	}
	return out
}

// firstServedBy waits until a request answered after t was served by c and returns how long after
// t that answer came.
func (l *trafficLoop) firstServedBy(t *testing.T, ctx context.Context, c *cluster.Cluster, from time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	for time.Since(from) < timeout && ctx.Err() == nil {
		for _, a := range l.since(from) {
			if a.servedBy == c.Name {
				return a.at.Sub(from)
			}
		}
		time.Sleep(l.interval)
	}
	t.Fatalf("no request was served by %s within %s", c.Name, timeout)
	return 0
}

// count tallies answers by who served them; "" counts failures.
func count(as []answer) map[string]int64 {
	m := map[string]int64{}
	for _, a := range as {
		m[a.servedBy]++
	}
	return m
}

// TestFailover: echo-failover has endpoints in the client's cluster and one other and PreferClose,
// so from the client's cluster traffic stays local. When the local endpoint turns unready, istiod
// marks it unhealthy and traffic moves to the other cluster: through its gateway when it is on
// another network, straight to its node's ztunnel when it shares the client's; when the local one
// recovers, traffic returns. Times run from the readiness change to the first request the other
// cluster served; the request interval is their resolution.
func TestFailover(t *testing.T) {
	ctx := mc.Context(t)
	p := dataPlane(t, ctx)
	target := p.setup.Failover()
	relation := topology.RelationOf(p.local.Cluster, target.Cluster)
	const interval = 10 * time.Millisecond
	loop := startTraffic(ctx, p, cluster.EchoFailover, interval)
	defer loop.Stop()

	// Steady state: everything stays in the client's cluster.
	steadyFrom, gwBefore := time.Now(), p.path(t, ctx).GatewayTunnels[target.Name]
	time.Sleep(time.Second)
	steady := count(loop.since(steadyFrom))
	require.Positive(t, steady[p.local.Name], "traffic reaches the local endpoint")
	assert.Zero(t, steady[target.Name], "with a healthy local endpoint nothing crosses to %s", target.Name)
	assert.Equal(t, gwBefore, p.path(t, ctx).GatewayTunnels[target.Name], "and nothing goes through the gateway")

	unready := time.Now()
	require.NoError(t, p.SetReady(ctx, cluster.EchoFailover, p.local.Name, false))
	failover := loop.firstServedBy(t, ctx, target, unready, 30*time.Second)
	// Once moved, nothing reaches the unready local endpoint any more.
	moved, at := time.Now(), p.path(t, ctx)
	time.Sleep(500 * time.Millisecond)
	assert.Zero(t, count(loop.since(moved))[p.local.Name], "no traffic to the unready local endpoint")
	now := p.path(t, ctx)
	if relation == topology.OtherNetwork {
		assert.Greater(t, now.GatewayTunnels[target.Name], at.GatewayTunnels[target.Name], "failed-over traffic rides the remote gateway")
	} else {
		assert.Equal(t, at.GatewayTunnels[target.Name], now.GatewayTunnels[target.Name], "failed-over traffic on the client's network skips the gateway")
		assert.Greater(t, now.Inbound[target.Name], at.Inbound[target.Name], "and goes straight to the peer's node")
	}

	ready := time.Now()
	require.NoError(t, p.SetReady(ctx, cluster.EchoFailover, p.local.Name, true))
	failback := loop.firstServedBy(t, ctx, p.local, ready, 30*time.Second)
	back := time.Now()
	time.Sleep(500 * time.Millisecond)
	assert.Zero(t, count(loop.since(back))[target.Name], "after recovery nothing crosses any more")

	during := count(loop.since(unready))
	var sent int64
	for _, n := range during {
		sent += n
	}
	failed := during[""]
	mc.Logf("failover: moved to %s in %.3fs, back in %.3fs (resolution %s); %d of %d requests failed during the switch",
		target.Name, failover.Seconds(), failback.Seconds(), interval, failed, sent)
	// Bounded, not zero: requests in flight while istiod pushes the change may fail.
	assert.LessOrEqual(t, failed, sent/10+5, "failed requests during the switch stay bounded")
	mc.Report.Failover = &report.Failover{
		Service: cluster.EchoFailover, Target: target.Name, Relation: string(relation), FailoverSeconds: failover.Seconds(), FailbackSeconds: failback.Seconds(),
		Requests: sent, FailedRequests: failed, ResolutionSeconds: interval.Seconds(),
	}
}
