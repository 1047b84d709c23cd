package latency

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
)

// The formula against what fortio did on an idle host: 43.2 QPS at 50 QPS, 2 s, 16 connections.
func TestCarriedAccountsForFortiosSchedule(t *testing.T) {
	assert.InDelta(t, 1.0, Carried(43.2, 50, 2*time.Second, 16), 0.01)
	assert.InDelta(t, 0.5, Carried(21.6, 50, 2*time.Second, 16), 0.01)
	assert.Zero(t, Carried(5, 5, time.Second, 16), "fewer calls than connections: nothing to judge")
}

// host stands in for the probes' data plane (probe.Env needs a mesh): it carries every
// rate up to limit in full, and above it only half, with its CPU busier at each rate.
type host struct {
	limit float64
	loads []probe.Load
}

func (h *host) Load(_ context.Context, l probe.Load) (*probe.LoadResult, error) {
	h.loads = append(h.loads, l)
	got := l.QPS * 0.99 // fortio's own schedule: about 99% at these rates over 2 s
	if l.QPS > h.limit {
		got = l.QPS / 2
	}
	n := int64(got * l.Duration.Seconds())
	return &probe.LoadResult{QPS: got, Requests: n, OK: n, HostCPUBusy: l.QPS / 2000, DurationSeconds: l.Duration.Seconds(),
		Percentiles: map[float64]float64{50: 0.001, 90: 0.002, 99: 0.003}, AvgSeconds: 0.0015}, nil
}

func TestSearchStopsAtTheFirstRateNotCarried(t *testing.T) {
	h := &host{limit: 200}
	rs, err := Search(context.Background(), flags(t, expctx.Latency{Connections: 16, Payload: 1024}), h, "echo-remote", report.PathCrossCluster)
	require.NoError(t, err)
	assert.Equal(t, 200.0, rs.QPS)
	require.Len(t, rs.Steps, 4, "50, 100, 200 carried, 400 not")
	assert.False(t, rs.Steps[3].Accepted)
	assert.Contains(t, rs.Steps[3].Reason, "of the rate got through")
	for _, l := range h.loads {
		assert.True(t, l.NewConnections, "the search loads the hardest path: new connections")
		assert.Equal(t, "echo-remote", l.App)
	}

	rs, err = Search(context.Background(), flags(t, expctx.Latency{Connections: 16}), &host{limit: 0}, "echo-remote", report.PathCrossCluster)
	require.NoError(t, err)
	assert.Equal(t, 10.0, rs.QPS, "nothing carried: the lowest rate, and the runs say they were saturated")
	require.Len(t, rs.Steps, 3, "50, then 20 and 10")
}

// A host that cannot carry the first rate (kind on two cores) gets a lower one, not a saturated run.
func TestSearchFallsBelowTheFirstRate(t *testing.T) {
	h := &host{limit: 30}
	rs, err := Search(context.Background(), flags(t, expctx.Latency{Connections: 4}), h, "echo-remote", report.PathCrossCluster)
	require.NoError(t, err)
	assert.Equal(t, 20.0, rs.QPS)
	require.Len(t, rs.Steps, 2, "50 not carried, 20 carried, 10 not tried")
	assert.False(t, rs.Steps[0].Accepted)
	assert.True(t, rs.Steps[1].Accepted)
	assert.Contains(t, rs.Rule, "falling to 10 where")
}

func TestRunTurnsFortioIntoARow(t *testing.T) {
	h := &host{limit: 1000}
	x := flags(t, expctx.Latency{Duration: 3 * time.Second, FloorDuration: time.Second, Connections: 16, Payload: 1024})
	row, err := Run(context.Background(), x, h, 100, probe.Load{App: "echo-local"}, report.PathLocal, report.ConnReused)
	require.NoError(t, err)
	assert.Equal(t, 1.0, row.P50Ms)
	assert.False(t, h.loads[0].NewConnections)
	assert.Equal(t, 3*time.Second, h.loads[0].Duration)
	_, err = Run(context.Background(), x, h, 100, probe.Load{Direct: true}, "floor", report.ConnNew)
	require.NoError(t, err)
	assert.Equal(t, time.Second, h.loads[1].Duration, "the harness floor runs for its own duration")
	assert.True(t, h.loads[1].NewConnections)
}

func TestStarved(t *testing.T) {
	ok := report.LatencyRun{QPS: 43.2, DurationSeconds: 2, HostCPUBusy: 0.5}
	assert.False(t, Starved(ok, 50, 16))
	assert.True(t, Starved(report.LatencyRun{QPS: 43.2, DurationSeconds: 2, HostCPUBusy: 0.95}, 50, 16), "a busy host")
	assert.True(t, Starved(report.LatencyRun{QPS: 30, DurationSeconds: 2, HostCPUBusy: 0.5}, 50, 16), "short of the rate")
}

// flags is the experiment context of a run with latency flags l.
func flags(t *testing.T, l expctx.Latency) *expctx.Context {
	return &expctx.Context{Flags: &expctx.Options{Latency: l}, Logf: t.Logf}
}
