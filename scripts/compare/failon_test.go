package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailOnIsCheckedBeforeAnythingRuns(t *testing.T) {
	_, err := parseFailOn("Join/perRemote:live-heap-B+10%", 3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "FAIL_ON with ROUNDS=3: benchstat's U test cannot call a difference of 3+3 samples significant")
	assert.Contains(t, err.Error(), "use ROUNDS=4 or more")
	fo, err := parseFailOn("Join/perRemote:live-heap-B+10%", 4)
	require.NoError(t, err)
	assert.Len(t, fo.bounds, 1)
	_, err = parseFailOn("Join/perRemote:live-heap-B", 5)
	assert.ErrorContains(t, err, "write NAME:UNIT+PCT%")

	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.yaml")
	require.NoError(t, os.WriteFile(plain, []byte("gates:\n  churn.runs[*].lost: {max: 0}\n"), 0o644))
	_, err = parseFailOn(plain, 5)
	assert.ErrorContains(t, err, "has no baseline: section")
	withAlpha := filepath.Join(dir, "alpha.yaml")
	require.NoError(t, os.WriteFile(withAlpha, []byte("baseline:\n  alpha: 0.2\n  bounds:\n    Join/perRemote:live-heap-B: {maxIncrease: 10%}\n"), 0o644))
	fo, err = parseFailOn(withAlpha, 3)
	require.NoError(t, err, "3+3 samples reach p=0.1 < 0.2")
	assert.Equal(t, 0.2, fo.alpha)
}

func TestFailOnJudgesBAgainstA(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, heap float64) string {
		var b strings.Builder
		for i := range 4 {
			fmt.Fprintf(&b, "pkg: x\nBenchmarkJoin/clusters=3/services=20/pods=100/istiods=all/perRemote 1 %g live-heap-B 0.07 join-cpu-s\n", heap+float64(i)*1e4)
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
		return p
	}
	a, b := write("a.bench.txt", 2.3e6), write("b.bench.txt", 2.9e6)
	fo, err := parseFailOn("Join/perRemote:live-heap-B+10%,Join/perRemote:join-cpu-s+10%", 4)
	require.NoError(t, err)
	gs, broken, err := fo.judge(dir, a, b)
	require.NoError(t, err)
	require.Len(t, gs, 2)
	assert.Equal(t, 1, broken, "+26%% live heap breaks, the unchanged join CPU does not")
	assert.Equal(t, "fail", gs[0].Verdict)
	assert.Contains(t, gs[0].Message, "median 2.915e+06 vs baseline 2.315e+06 (+25.9%, p=0.029 n=4, alpha 0.05) breaks at most +10% vs baseline")
	data, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	require.NoError(t, err)
	var doc struct {
		Suites []struct {
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(data, &doc))
	assert.Equal(t, 1, doc.Suites[0].Failures)
	assert.Equal(t, "TestGates/Join/perRemote:live-heap-B/BenchmarkJoin/clusters=3/services=20/pods=100/istiods=all/perRemote", doc.Suites[0].Cases[0].Name)
	assert.Contains(t, string(gatesMarkdown(gs)), "## Gates\n\n1 of 2 broken.")
}
