package report_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

func TestIstiodChecks(t *testing.T) {
	r := report.New(report.ProviderLocal)
	data, err := json.Marshal(r)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "istiodChecks", "absent when no check ran")

	r.IstiodChecks = reporttest.Checks()
	require.NoError(t, r.Validate())
	data, err = json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"istiodChecks":[{"name":"memory comes back","result":"known-issue","reference":"istio/istio#61263","detail":"krt collections 120 to 180"}`)

	r.IstiodChecks[1].Result = "flaky"
	assert.ErrorContains(t, r.Validate(), `istiodChecks[1].result "flaky"`)
	r.IstiodChecks[1].Result = report.CheckKnownIssue
	assert.ErrorContains(t, r.Validate(), "known-issue without a reference")
}
