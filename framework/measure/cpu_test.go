package measure

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCPURateIsCPUSecondsOverWallSeconds(t *testing.T) {
	t0 := time.Date(2026, 8, 27, 12, 0, 0, 0, time.UTC)
	a := &Metrics{At: t0, CPUSecondsTotal: 100}
	b := &Metrics{At: t0.Add(30 * time.Second), CPUSecondsTotal: 100.6}
	assert.InDelta(t, 0.02, CPURate(a, b), 1e-12)

	// A 2.5-core burst over 2 s.
	c := &Metrics{At: t0.Add(32 * time.Second), CPUSecondsTotal: 105.6}
	assert.InDelta(t, 2.5, CPURate(b, c), 1e-12)
}

func TestCPURateIsNaNForWindowsThatCannotBeMeasured(t *testing.T) {
	t0 := time.Now()
	a := &Metrics{At: t0, CPUSecondsTotal: 10}
	assert.True(t, math.IsNaN(CPURate(a, a)), "zero wall time")
	assert.True(t, math.IsNaN(CPURate(&Metrics{At: t0.Add(time.Second), CPUSecondsTotal: 11}, a)), "reversed")
	assert.True(t, math.IsNaN(CPURate(a, &Metrics{At: t0.Add(time.Second), CPUSecondsTotal: 2})), "counter reset")
	assert.True(t, math.IsNaN(CPURate(nil, a)))
}

func TestCPUWindow(t *testing.T) {
	t0 := time.Date(2026, 8, 27, 12, 0, 0, 0, time.UTC)
	w := CPUWindow{
		Start: &Metrics{At: t0, CPUSecondsTotal: 40},
		End:   &Metrics{At: t0.Add(62 * time.Second), CPUSecondsTotal: 43.1},
	}
	assert.Equal(t, 62*time.Second, w.Duration())
	sec, err := w.CPUSeconds()
	require.NoError(t, err)
	assert.InDelta(t, 3.1, sec, 1e-9)
	cores, err := w.Cores()
	require.NoError(t, err)
	assert.InDelta(t, 3.1/62, cores, 1e-12)

	_, err = CPUWindow{Start: w.Start}.Cores()
	assert.Error(t, err)
	_, err = CPUWindow{Start: w.End, End: w.Start}.CPUSeconds()
	assert.ErrorContains(t, err, "not after its start")
	_, err = CPUWindow{Start: w.Start, End: &Metrics{At: t0.Add(time.Second), CPUSecondsTotal: 1}}.Cores()
	assert.ErrorContains(t, err, "restarted")
}
