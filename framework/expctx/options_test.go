package expctx

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o := Register(fs)
	require.NoError(t, fs.Parse(args))
	return o, o.Validate()
}

// rejection is flags that validation must refuse, and what its error must say.
type rejection struct {
	args []string
	want string
}

// assertRejected checks that validation refuses each set of flags with an error saying its want.
func assertRejected(t *testing.T, rejections []rejection) {
	t.Helper()
	for _, r := range rejections {
		_, err := parse(t, r.args...)
		require.Error(t, err, "%v", r.args)
		assert.Contains(t, err.Error(), r.want, "%v", r.args)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	assertRejected(t, []rejection{
		{[]string{"-join.timeout=0s"}, "-join.timeout"},
		{[]string{"-join.samples=0"}, "-join.samples"},
		{[]string{"-join.repeats=0"}, "-join.repeats=0: choose 1 to 20"},
		{[]string{"-join.settle=1s", "-join.steady=1m"}, "-join.steady=1m0s is longer than -join.settle=1s"},
		{[]string{"-join.xds-clients=500"}, "-join.xds-clients"},
		{[]string{"-latency.duration=-1s"}, "-latency.duration"},
		{[]string{"-latency.floor-duration=0s"}, "-latency.floor-duration"},
		{[]string{"-latency.connections=0"}, "-latency.connections"},
		{[]string{"-latency.qps=-5"}, "-latency.qps"},
		{[]string{"-checks.clusters=-1"}, "-checks.clusters"},
	})
	_, err := parse(t)
	assert.NoError(t, err, "the defaults are valid")
}
