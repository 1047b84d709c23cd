package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func churnReport() *Report {
	r := New(ProviderLocal)
	r.Topology = Topology{Clusters: []TopologyCluster{{Name: "cluster-1"}, {Name: "cluster-2"}, {Name: "cluster-3"}}}
	run := func(where, mode string, rate, p50, p99 float64) ChurnRun {
		return ChurnRun{Where: where, Mode: mode, RatePodsPerSecond: rate, AchievedPodsPerSecond: rate, Clusters: []string{"cluster-2"},
			DurationSeconds: 20, CostSeconds: 21, Changes: 40, Samples: 80, P50Ms: F(p50), P90Ms: F(p50 * 1.5), P99Ms: F(p99), MaxMs: F(p99),
			IstiodCPUCores: F(0.03), IstiodCPUResolutionCores: F(0.0005), PushesPerSecond: F(5), PushesPerSecondByType: map[string]float64{"wds": 5},
			ConnectedXDSClients: F(1), RSSBytes: F(160e6), LiveHeapBytes: F(27e6)}
	}
	r.Churn = &Churn{
		ObservedIstiod: "cluster-1", Clients: 1, LostAfterMs: 15000,
		Debounce: ChurnDebounce{AfterMs: 100, MaxMs: 10000},
		Runs: []ChurnRun{
			run(ChurnLocal, "replace", 2, 110, 130), run(ChurnLocal, "replace", 20, 4800, 9900),
			run(ChurnOneRemote, "replace", 2, 120, 200), run(ChurnOneRemote, "replace", 20, 340, 1000),
		},
		Knee:    []ChurnKnee{{Where: ChurnLocal, Mode: "replace", BaseRate: 2, BaseP50Ms: 110, RatePodsPerSecond: F(20)}, {Where: ChurnOneRemote, Mode: "replace", BaseRate: 2, BaseP50Ms: 120}},
		Finding: &ChurnFinding{Cluster: "cluster-2", Service: "svc-0", Endpoints: 5, CapacityBefore: 5, CapacityWithOneUnready: 5, CapacityWithAllUnready: 5, UnreadyCountedInCapacity: true, Detail: "unready counted"},
	}
	return r
}

func TestChurnJSONKeys(t *testing.T) {
	b, err := json.Marshal(churnReport())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	c := m["churn"].(map[string]any)
	for _, k := range []string{"observedIstiod", "clients", "debounce", "lostAfterMs", "runs", "knee", "finding"} {
		assert.Contains(t, c, k)
	}
	assert.Equal(t, map[string]any{"afterMs": 100.0, "maxMs": 10000.0}, c["debounce"])
	run := c["runs"].([]any)[0].(map[string]any)
	// DESIGN.md's names for a churn run.
	for _, k := range []string{"where", "mode", "ratePodsPerSecond", "changes", "lost", "p50Ms", "p90Ms", "p99Ms", "maxMs", "istiodCPUCores", "pushesPerSecond"} {
		assert.Contains(t, run, k)
	}
	assert.NotContains(t, run, "percentOfPods", "absent when the window was sized by duration")
	knee := c["knee"].([]any)[1].(map[string]any)
	assert.NotContains(t, knee, "ratePodsPerSecond", "no knee in the sweep is absent, not 0")
}

func TestChurnAbsentValuesStayAbsent(t *testing.T) {
	r := churnReport()
	r.Churn.Runs = []ChurnRun{{Where: ChurnLocal, Mode: "replace", RatePodsPerSecond: 2, Lost: 3}}
	b, err := json.Marshal(r.Churn.Runs[0])
	require.NoError(t, err)
	for _, k := range []string{"p50Ms", "maxMs", "istiodCPUCores", "pushesPerSecond", "rssBytes"} {
		assert.NotContains(t, string(b), k)
	}
	assert.Nil(t, churnSVG(r.Churn), "no latency, no chart")
	assert.NotContains(t, string(Markdown(r)), ChurnSVG)

	none := New(ProviderLocal)
	b, err = json.Marshal(none)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"churn"`)
}

func TestChurnMarkdownStatesDebounceAndArrival(t *testing.T) {
	md := string(Markdown(churnReport()))
	for _, want := range []string{"## Churn", "PILOT_DEBOUNCE_AFTER = 100 ms", "PILOT_DEBOUNCE_MAX = 10000 ms", "arrival",
		"in the test process", "| local | replace | 20.0 |", "### Knee", "none in the sweep", "unready counted", "![propagation latency"} {
		assert.Contains(t, md, want)
	}
}

func TestChurnBenchLines(t *testing.T) {
	b := string(Bench(churnReport()))
	assert.Contains(t, b, "BenchmarkChurn/clusters=3/where=local/mode=replace/rate=20 1 4800 p50-ms")
	assert.Contains(t, b, "BenchmarkChurn/clusters=3/where=one-remote/mode=replace/rate=2 1 ")
	assert.Contains(t, b, " 5 wds-pushes/s")
	for _, l := range strings.Split(b, "\n") {
		if strings.HasPrefix(l, "BenchmarkChurn") {
			assert.Len(t, strings.Fields(l)[:2], 2)
			assert.Equal(t, "1", strings.Fields(l)[1], "iteration count")
		}
	}
}

func TestChurnSVGAndWrite(t *testing.T) {
	r := churnReport()
	svg := string(churnSVG(r.Churn))
	assert.Contains(t, svg, `data-series="local replace"`)
	assert.Contains(t, svg, `data-series="one-remote replace"`)
	assert.Contains(t, svg, "pods/s")

	dir := t.TempDir()
	require.NoError(t, Write(dir, r))
	_, err := os.Stat(filepath.Join(dir, ChurnSVG))
	require.NoError(t, err)
	r.Churn = nil
	require.NoError(t, Write(dir, r))
	_, err = os.Stat(filepath.Join(dir, ChurnSVG))
	assert.True(t, os.IsNotExist(err), "a stale churn chart is removed")
}

func TestChurnValidate(t *testing.T) {
	r := churnReport()
	r.Churn.Runs[0].Where = "elsewhere"
	err := r.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "churn.runs[0].where")
}
