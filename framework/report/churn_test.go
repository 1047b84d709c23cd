package report_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

func TestChurnJSONKeys(t *testing.T) {
	b, err := json.Marshal(reporttest.Churn())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	c := m["churn"].(map[string]any)
	for _, k := range []string{"observedIstiod", "clients", "debounce", "lostAfterMs", "runs", "knee", "finding"} {
		assert.Contains(t, c, k)
	}
	assert.Equal(t, map[string]any{"afterMs": 100.0, "maxMs": 10000.0}, c["debounce"])
	run := c["runs"].([]any)[0].(map[string]any)
	// A churn run's names, as docs/report.md#churn gives them.
	for _, k := range []string{"where", "mode", "ratePodsPerSecond", "changes", "lost", "p50Ms", "p90Ms", "p99Ms", "maxMs", "istiodCPUCores", "pushesPerSecond"} {
		assert.Contains(t, run, k)
	}
	assert.NotContains(t, run, "percentOfPods", "absent when the window was sized by duration")
	knee := c["knee"].([]any)[1].(map[string]any)
	assert.NotContains(t, knee, "ratePodsPerSecond", "no knee in the sweep is absent, not 0")
}

func TestChurnAbsentValuesStayAbsent(t *testing.T) {
	r := reporttest.Churn()
	r.Churn.Runs = []report.ChurnRun{{Where: report.ChurnLocal, Mode: "replace", RatePodsPerSecond: 2, Lost: 3}}
	b, err := json.Marshal(r.Churn.Runs[0])
	require.NoError(t, err)
	for _, k := range []string{"p50Ms", "maxMs", "istiodCPUCores", "pushesPerSecond", "rssBytes"} {
		assert.NotContains(t, string(b), k)
	}

	none := report.New(report.ProviderLocal)
	b, err = json.Marshal(none)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"churn"`)
}

func TestChurnValidate(t *testing.T) {
	r := reporttest.Churn()
	r.Churn.Runs[0].Where = "elsewhere"
	err := r.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "churn.runs[0].where")
}
