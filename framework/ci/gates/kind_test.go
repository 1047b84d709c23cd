package gates

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
)

// kindPassReport is the report of a real make ci-kind (testdata/kind-pass-report.json: `make
// ci-kind` at 10c4c92 on the project's 2-core host, 2026-12-07), as JSON.
func kindPassReport(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("testdata/kind-pass-report.json")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	return doc
}

// judgeKind judges gates/ci-kind.yaml on doc and returns the gates that did not pass.
func judgeKind(t *testing.T, f *File, doc map[string]any) []string {
	t.Helper()
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	gs, err := f.Judge(data)
	require.NoError(t, err)
	var broken []string
	for _, g := range gs {
		if g.Verdict != report.GatePass {
			broken = append(broken, g.Path+": "+g.Verdict)
		}
	}
	return broken
}

// gates/ci-kind.yaml passes a real kind pass, and breaks (so make ci-kind fails) when what it asks
// for is missing or wrong, or when one of its own bounds is broken on purpose.
func TestKindGates(t *testing.T) {
	f, err := Load("../../../gates/ci-kind.yaml")
	require.NoError(t, err)
	assert.Empty(t, judgeKind(t, f, kindPassReport(t)), "a real make ci-kind report passes every gate")

	for _, c := range []struct {
		name   string
		change func(doc map[string]any)
		broken string
	}{
		{"no failover measured", func(doc map[string]any) { delete(doc, "failover") }, "failover.failoverSeconds: " + report.GateNotMeasured},
		{"the same-network path missing", func(doc map[string]any) { delete(doc["latency"].(map[string]any), "sameNetworkOverhead") }, "latency.sameNetworkOverhead.new.deltaMs: " + report.GateNotMeasured},
		{"no per-remote figures", func(doc map[string]any) { delete(doc["controlPlane"].(map[string]any), "perRemoteCluster") }, "controlPlane.perRemoteCluster.liveHeapBytes.value: " + report.GateNotMeasured},
		{"a check failed", func(doc map[string]any) {
			doc["istiodChecks"].([]any)[0].(map[string]any)["result"] = report.CheckFail
		}, "istiodChecks[*].result: " + report.GateFail},
		{"a local run judged by the kind gates", func(doc map[string]any) { doc["provider"] = report.ProviderLocal }, "provider: " + report.GateFail},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := kindPassReport(t)
			c.change(doc)
			assert.Contains(t, judgeKind(t, f, doc), c.broken)
		})
	}

	t.Run("a gate broken on purpose", func(t *testing.T) {
		data, err := os.ReadFile("../../../gates/ci-kind.yaml")
		require.NoError(t, err)
		broken, err := Parse("broken.yaml", append(data, []byte("\n  failover.requests: {max: 0, reason: \"broken on purpose: every failover sends requests\"}\n")...))
		require.NoError(t, err)
		assert.Equal(t, []string{"failover.requests: " + report.GateFail}, judgeKind(t, broken, kindPassReport(t)))
	})
}
