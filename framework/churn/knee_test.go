package churn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
)

func TestKneesPerCaseAndMode(t *testing.T) {
	run := func(where string, rate, p50 float64) report.ChurnRun {
		return report.ChurnRun{Where: where, Mode: Replace, RatePodsPerSecond: rate, P50Ms: report.F(p50)}
	}
	got := Knees([]report.ChurnRun{
		run(report.ChurnLocal, 10, 100), run(report.ChurnLocal, 50, 150), run(report.ChurnLocal, 100, 260),
		run(report.ChurnOneRemote, 10, 100), run(report.ChurnOneRemote, 50, 120),
		run(report.ChurnAllRemote, 10, 100), // one rate: no knee to find
	})
	require.Len(t, got, 2)
	assert.Equal(t, report.ChurnLocal, got[0].Where)
	require.NotNil(t, got[0].RatePodsPerSecond)
	assert.Equal(t, 100.0, *got[0].RatePodsPerSecond, "the first rate over twice the base p50")
	assert.Equal(t, 10.0, got[0].BaseRate)
	assert.Nil(t, got[1].RatePodsPerSecond, "never doubled")
}

func TestShowsAndMismatches(t *testing.T) {
	assert.True(t, Shows(nil, map[string]string{"k": Absent}))
	assert.False(t, Shows(nil, map[string]string{"k": Healthy}))
	m := &Measured{Mismatched: map[string]string{"b": Absent, "a": Unhealthy}, Truth: map[string]string{"a": Healthy, "b": Healthy}}
	assert.Equal(t, []string{`a: watcher "unhealthy", API "healthy"`}, m.FirstMismatches(1))
}
