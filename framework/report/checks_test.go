package report

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIstiodChecks(t *testing.T) {
	r := New(ProviderLocal)
	data, err := json.Marshal(r)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "istiodChecks", "absent when no check ran")
	assert.NotContains(t, string(Markdown(r)), "istiod property checks")

	r.IstiodChecks = []IstiodCheck{
		{Name: "memory comes back", Result: CheckKnownIssue, Reference: "istio/istio#61263", Detail: "krt collections 120 to 180"},
		{Name: "a deletion mid-sync does not wedge", Result: CheckPass, Detail: "canary synced in 0.2s"},
	}
	require.NoError(t, r.Validate())
	data, err = json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"istiodChecks":[{"name":"memory comes back","result":"known-issue","reference":"istio/istio#61263","detail":"krt collections 120 to 180"}`)
	md := string(Markdown(r))
	assert.Contains(t, md, "| memory comes back | known-issue | istio/istio#61263 | krt collections 120 to 180 |")
	assert.Contains(t, md, "| a deletion mid-sync does not wedge | pass |  | canary synced in 0.2s |")

	r.IstiodChecks[1].Result = "flaky"
	assert.ErrorContains(t, r.Validate(), `istiodChecks[1].result "flaky"`)
	r.IstiodChecks[1].Result = CheckKnownIssue
	assert.ErrorContains(t, r.Validate(), "known-issue without a reference")
}
