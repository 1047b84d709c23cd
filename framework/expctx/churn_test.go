package expctx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChurnFlagDefaults(t *testing.T) {
	f, err := parse(t)
	require.NoError(t, err)
	c := f.Churn
	assert.Equal(t, []float64{5, 20}, c.Rates, "one rate on each side of the debounce knee")
	assert.Equal(t, 5*time.Second, c.Duration, "short windows: the main command's budget")
	assert.Empty(t, c.Percents)
	assert.Equal(t, []string{CaseLocal, "all-remote"}, c.Cases, "every remote at once, at a total rate: work that does not grow with the clusters")
	assert.Equal(t, []string{"replace"}, c.Modes)
	assert.Equal(t, 1, c.Clients)
}

// make e2e runs the full sweep this package names.
func TestMakeE2ERunsTheFullSweep(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	require.NoError(t, err)
	var full string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "E2E_FULL"); ok {
			full = v
		}
	}
	require.NotEmpty(t, full, "the Makefile sets E2E_FULL")
	for _, want := range []string{
		"-churn.rates=" + strings.Join(FullChurnRates, ","),
		"-churn.duration=" + FullChurnDuration.String(),
		"-churn.cases=" + strings.Join(ChurnCases, ","),
		"-churn.modes=" + strings.Join(ChurnModes, ","),
	} {
		assert.Contains(t, full, want)
	}
}

func TestChurnFlagsParse(t *testing.T) {
	f, err := parse(t, "-churn.rates=20, 5", "-churn.percent=50%,25", "-churn.cases=all-remote,local", "-churn.modes=replace", "-churn.clients=3")
	require.NoError(t, err)
	c := f.Churn
	assert.Equal(t, []float64{5, 20}, c.Rates, "sorted")
	assert.Equal(t, []float64{25, 50}, c.Percents)
	assert.Equal(t, []string{"local", "all-remote"}, c.Cases, "in the suite's order")
	assert.Equal(t, []string{"replace"}, c.Modes)
	assert.Equal(t, 3, c.Clients)
}

func TestChurnFlagsRejectBadValuesNamingTheFlag(t *testing.T) {
	assertRejected(t, []rejection{
		{[]string{"-churn.rates=0"}, "-churn.rates"},
		{[]string{"-churn.rates=fast"}, "-churn.rates"},
		{[]string{"-churn.rates=5,5"}, "appears twice"},
		{[]string{"-churn.rates="}, "-churn.rates"},
		{[]string{"-churn.percent=150"}, "-churn.percent"},
		{[]string{"-churn.cases=everywhere"}, "-churn.cases"},
		{[]string{"-churn.modes=,"}, "-churn.modes"},
		{[]string{"-churn.duration=0s"}, "-churn.duration"},
		{[]string{"-churn.clients=0"}, "-churn.clients"},
	})
}
