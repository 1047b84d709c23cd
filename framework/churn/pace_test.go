package churn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
)

func TestPacerSchedule(t *testing.T) {
	p, err := NewPacer(t0, 20)
	require.NoError(t, err)
	assert.Equal(t, 50*time.Millisecond, p.Interval())
	assert.Equal(t, t0, p.Next())
	p.Started(t0)
	p.Started(t0.Add(60 * time.Millisecond)) // due at 50 ms: 10 ms behind, not late
	assert.Equal(t, t0.Add(100*time.Millisecond), p.Next())
	// A change that starts 300 ms late is late, and the schedule does not shift.
	p.Started(t0.Add(400 * time.Millisecond))
	assert.Equal(t, 1, p.Late)
	assert.Equal(t, t0.Add(150*time.Millisecond), p.Next())
	assert.Equal(t, 3, p.Count())
}

func TestPacerHoldsRate(t *testing.T) {
	p, err := NewPacer(time.Now(), 200)
	require.NoError(t, err)
	start := time.Now()
	for range 40 {
		require.NoError(t, p.Wait(context.Background()))
	}
	// 40 changes at 200/s: the 40th is due at 195 ms. Sleeping can only make it later.
	elapsed := time.Since(start)
	assert.GreaterOrEqual(t, elapsed, 190*time.Millisecond)
	assert.Equal(t, 40, p.Count())
}

func TestPacerRejectsBadRates(t *testing.T) {
	for _, r := range []float64{0, -1, 2e6} {
		_, err := NewPacer(t0, r)
		assert.Error(t, err, "rate %g", r)
	}
}

func TestPacerWaitStopsWithContext(t *testing.T) {
	p, err := NewPacer(time.Now().Add(time.Hour), 1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, p.Wait(ctx), context.Canceled)
	assert.Zero(t, p.Count())
}

const costBefore = `# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 10.5
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.5e+08
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 5e+07
# TYPE go_goroutines gauge
go_goroutines 900
# TYPE pilot_xds gauge
pilot_xds{version="unknown"} 2
# TYPE pilot_xds_pushes counter
pilot_xds_pushes{type="wds"} 100
pilot_xds_pushes{type="wds_senderr"} 1
# TYPE citadel_server_csr_count counter
citadel_server_csr_count 60
# TYPE citadel_server_success_cert_issuance_count counter
citadel_server_success_cert_issuance_count 59
`

func TestCostBetween(t *testing.T) {
	a, err := measure.ParseMetrics(strings.NewReader(costBefore), t0)
	require.NoError(t, err)
	after := strings.NewReplacer("10.5", "12.5", `{type="wds"} 100`, `{type="wds"} 140`+"\npilot_xds_pushes{type=\"cds\"} 4",
		`{type="wds_senderr"} 1`, `{type="wds_senderr"} 9`, `pilot_xds{version="unknown"} 2`, `pilot_xds{version="unknown"} 3`,
		"csr_count 60", "csr_count 64", "issuance_count 59", "issuance_count 62").Replace(costBefore)
	b, err := measure.ParseMetrics(strings.NewReader(after), t0.Add(20*time.Second))
	require.NoError(t, err)
	cpuA := measure.CPUReading{At: t0, Seconds: 10.5, Resolution: 0.01, Source: "test"}
	cpuB := measure.CPUReading{At: t0.Add(20 * time.Second), Seconds: 12.5, Resolution: 0.01, Source: "test"}
	c, err := CostBetween(cpuA, cpuB, a, b)
	require.NoError(t, err)
	assert.InDelta(t, 0.1, c.CPUCores, 1e-9)
	assert.InDelta(t, 0.0005, c.ResolutionCores, 1e-12)
	assert.Equal(t, map[string]float64{"wds": 2, "cds": 0.2}, c.ByType, "send errors are not pushes")
	require.NotNil(t, c.PushesPerSecond)
	assert.InDelta(t, 2.2, *c.PushesPerSecond, 1e-9)
	require.NotNil(t, c.ConnectedXDS)
	assert.Equal(t, 3.0, *c.ConnectedXDS)
	assert.Equal(t, report.IstiodCSRs{Received: 4, Issued: 3}, c.CSRs, "istiod's CA counters over the window")

	_, err = CostBetween(cpuB, cpuA, b, a)
	assert.Error(t, err, "a window that ends before it starts")
	restarted, err := measure.ParseMetrics(strings.NewReader(strings.NewReplacer("csr_count 64", "csr_count 2").Replace(after)), t0.Add(20*time.Second))
	require.NoError(t, err)
	_, err = CostBetween(cpuA, cpuB, a, restarted)
	assert.ErrorContains(t, err, "istiod restarted?", "a CSR counter that fell is no window's count")

	// No pilot_xds_pushes exported: pushes are absent, not 0.
	quiet := strings.NewReplacer(`pilot_xds_pushes{type="wds"} 100`, "", `pilot_xds_pushes{type="wds_senderr"} 1`, "", "# TYPE pilot_xds_pushes counter", "").Replace(costBefore)
	q, err := measure.ParseMetrics(strings.NewReader(quiet), t0.Add(20*time.Second))
	require.NoError(t, err)
	c, err = CostBetween(cpuA, cpuB, a, q)
	require.NoError(t, err)
	assert.Nil(t, c.PushesPerSecond)
}
