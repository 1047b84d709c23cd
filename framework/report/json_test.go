package report_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

// NaN and Inf, optional or plain, in a struct field or a map: the JSON is still written, is valid
// and lacks the value, and a warning names the field.
func TestJSONDropsNonFiniteValuesWithAWarning(t *testing.T) {
	r := reporttest.Full()
	r.ControlPlane.Joins[0].SteadyCPUCores = report.F(math.NaN())
	r.ControlPlane.PerRemoteCluster.RSSBytes.Value = math.Inf(1)
	r.Failover = &report.Failover{Service: "echo-failover", FailoverSeconds: math.NaN(), FailbackSeconds: 0.17, Requests: 10}
	r.Latency.Runs[1].P99Ms = math.Inf(-1)
	r.Latency.Overhead.New.DeltaMs = math.NaN()
	r.Setup.Clusters[0].RSSBytes["istiod"] = math.NaN()
	b, err := report.JSON(r)
	require.NoError(t, err)
	require.True(t, json.Valid(b))
	var back report.Report
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Nil(t, back.ControlPlane.Joins[0].SteadyCPUCores)
	assert.NotNil(t, back.ControlPlane.Joins[0].CPUCores)
	assert.Nil(t, back.ControlPlane.PerRemoteCluster.RSSBytes)
	assert.NotContains(t, back.Setup.Clusters[0].RSSBytes, "istiod")
	assert.Contains(t, back.Setup.Clusters[0].RSSBytes, "etcd")

	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	fo := raw["failover"].(map[string]any)
	assert.NotContains(t, fo, "failoverSeconds", "a plain NaN field must be absent, not 0")
	assert.Equal(t, 0.17, fo["failbackSeconds"])
	run := raw["latency"].(map[string]any)["runs"].([]any)[1].(map[string]any)
	assert.NotContains(t, run, "p99Ms")
	assert.Contains(t, run, "p90Ms")
	// Key order survives the removal.
	assert.Less(t, strings.Index(string(b), `"service"`), strings.Index(string(b), `"failbackSeconds"`))

	for _, field := range []string{"controlPlane.joins[0].steadyCPUCores was NaN", "controlPlane.perRemoteCluster.rssBytes was +Inf",
		"failover.failoverSeconds was NaN", "latency.runs[1].p99Ms was -Inf", "setup.clusters[0].rssBytes.istiod was NaN"} {
		assert.True(t, strings.Contains(strings.Join(back.Warnings, "\n"), field), "no warning for %s in %q", field, back.Warnings)
	}
	assert.Equal(t, back.Warnings, r.Warnings, "the warnings are in r too")
	assert.Nil(t, r.ControlPlane.Joins[0].SteadyCPUCores, "optional values become nil in r")
	assert.Equal(t, math.Inf(-1), r.Latency.Runs[1].P99Ms, "plain fields are restored after writing")

	// Written again (a partial report, then the final one): each field is named once.
	n := len(r.Warnings)
	_, err = report.JSON(r)
	require.NoError(t, err)
	assert.Len(t, r.Warnings, n)
}
