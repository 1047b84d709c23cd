package svg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

// parseSVG checks the chart is well-formed XML with an <svg> root and returns its text content
// and the data-series attributes, which name the plotted series.
func parseSVG(t *testing.T, name string, b []byte) (text string, series map[string]int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	series = map[string]int{}
	var sb strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", name, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			for _, a := range tok.Attr {
				if a.Name.Local == "data-series" {
					series[a.Value]++
				}
			}
		case xml.CharData:
			sb.Write(tok)
			sb.WriteByte('\n')
		}
	}
	if root != "svg" {
		t.Fatalf("%s root element is %q", name, root)
	}
	return sb.String(), series
}

func TestControlPlaneSVG(t *testing.T) {
	cp := reporttest.Full().ControlPlane
	require.True(t, DrawsControlPlane(cp))
	text, series := parseSVG(t, ControlPlaneFile, ControlPlane(cp))
	// Three levels (baseline + 2 joins) per memory/CPU series, one polyline each.
	for _, s := range []string{"RSS", "heap in use", "live heap", "blended CPU", "steady CPU", "join CPU-seconds"} {
		if series[s] != 1 {
			t.Errorf("series %q drawn %d times, want 1", s, series[s])
		}
		if !strings.Contains(text, s) {
			t.Errorf("legend lacks %q", s)
		}
	}
	assert.Empty(t, reporttest.Lacking(text, "joined remote clusters", "MB", "CPU cores", "CPU-seconds"), "axis labels missing")
	// Tooltips carry the values: the baseline RSS is 150 MB, the second join's 390 MB.
	assert.Empty(t, reporttest.Lacking(text, "RSS: 150 MB at 0", "RSS: 390 MB at 2", "live heap: 92 MB at 1"), "points missing")
}

func TestLatencySVG(t *testing.T) {
	l := reporttest.Full().Latency
	require.True(t, DrawsLatency(l))
	text, series := parseSVG(t, LatencyFile, Latency(l))
	// 4 runs + 1 harness floor run, one bar per statistic each.
	for _, s := range []string{"avg", "p50", "p90", "p99"} {
		if series[s] != 5 {
			t.Errorf("%s bars = %d, want 5", s, series[s])
		}
	}
	assert.Empty(t, reporttest.Lacking(text, "cross-cluster", "direct", "reused", "cross-cluster new p99: 6.1 ms", "ms"), "latency chart lacks these")
}

func TestChurnSVG(t *testing.T) {
	c := reporttest.Churn().Churn
	require.True(t, DrawsChurn(c))
	_, series := parseSVG(t, ChurnFile, Churn(c))
	// Two series (local, one-remote), each in the p50 and the p99 panel.
	assert.Equal(t, map[string]int{"local replace": 2, "one-remote replace": 2}, series)
	assert.Contains(t, string(Churn(c)), "pods/s")
}

func TestRotationSVG(t *testing.T) {
	checks := reporttest.Every().IstiodChecks
	text, series := parseSVG(t, RotationFile, Rotation(checks))
	assert.Equal(t, map[string]int{"live heap": 1, "goroutines": 1}, series)
	assert.Contains(t, text, "live heap: 42 MB at 10")
	assert.Nil(t, Rotation(checks[1:]), "no rotation figures, no chart")
}

// A section without what a chart plots has no chart, and the Draws functions say so.
func TestNoChartWithoutData(t *testing.T) {
	assert.False(t, DrawsControlPlane(nil))
	assert.False(t, DrawsControlPlane(&report.ControlPlane{}), "a baseline alone")
	assert.Nil(t, ControlPlane(&report.ControlPlane{}))
	assert.False(t, DrawsLatency(&report.Latency{}))
	assert.Nil(t, Latency(nil))
	noLatency := &report.Churn{Runs: []report.ChurnRun{{Where: report.ChurnLocal, Mode: "replace", RatePodsPerSecond: 2, Lost: 3}}}
	assert.False(t, DrawsChurn(noLatency))
	assert.Nil(t, Churn(noLatency), "no latency, no chart")
}
