package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
)

func TestBadInputNamesTheFlag(t *testing.T) {
	_, err := parseSizes("1,ten")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BENCH_CLUSTERS")
	_, err = parseSizes("0")
	require.Error(t, err)
	ns, err := parseSizes("1, 10,50")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 10, 50}, ns)

	for _, f := range []string{"-clusters=3", "-report-dir=x", "-provider=kind"} {
		assert.Error(t, checkFlags([]string{"-scale=medium", f}), f)
	}
	assert.NoError(t, checkFlags([]string{"-scale=medium", "-join.settle=8s"}))
}

// TestTableSaysWhatWasNotMeasured: a size without joins (one cluster) is never a row of zeros.
func TestTableSaysWhatWasNotMeasured(t *testing.T) {
	one := report.New("local")
	one.Setup = &report.Setup{TotalSeconds: 3.9, PerClusterRSSBytes: report.F(353e6)}
	ten := report.New("local")
	ten.ControlPlane = &report.ControlPlane{
		Joins:      []report.Join{{RemoteClusters: 1, ConvergenceSeconds: report.F(0.2)}, {RemoteClusters: 9, ConvergenceSeconds: report.F(0.37)}},
		JoinGrowth: &report.JoinGrowth{ConvergenceSeconds: &report.Line{Intercept: 0.2, Slope: 0.018, SlopeStdErr: report.F(0.006), N: 9}},
	}
	md := string(markdown([]row{rowOf(1, 17*time.Second, one), rowOf(10, time.Minute, ten)}, nil))
	assert.Contains(t, md, "| 1 |  | 17s | 3.9 (not measured) | 353 / not measured |")
	assert.Contains(t, md, "no joins")
	assert.Contains(t, md, "0.20 / 0.37 | 0.20 + 0.018·k s (slope ±0.006, 9 joins) |")
	assert.NotContains(t, md, "| 0 |")
}
