package experiment

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
)

func TestPercentsOrNoneIsOneTimedWindowWithoutPercents(t *testing.T) {
	assert.Equal(t, []*float64{nil}, PercentsOrNone(nil))
	ps := PercentsOrNone([]float64{10, 50})
	require.Len(t, ps, 2)
	assert.Equal(t, 10.0, *ps[0])
	assert.Equal(t, 50.0, *ps[1])
}

// A run of n requests opens one tunnel per request and one per connection for fortio's warm-up on
// new connections, one per connection on reused ones; the destination counts requests, or
// tunnels where the provider counts connections.
func TestTunnelsAndReached(t *testing.T) {
	r := New(&expctx.Options{Latency: expctx.Latency{Connections: 16}}, nil)
	assert.EqualValues(t, 116, r.Tunnels(report.ConnNew, 100))
	assert.EqualValues(t, 16, r.Tunnels(report.ConnReused, 100))
	assert.EqualValues(t, 116, r.Reached(probe.PathCounters{}, report.ConnReused, 100))
	assert.EqualValues(t, 16, r.Reached(probe.PathCounters{ServedConnections: true}, report.ConnReused, 100))
	assert.EqualValues(t, 116, r.Reached(probe.PathCounters{ServedConnections: true}, report.ConnNew, 100))
}

// errors records what an assertion reports instead of failing the test.
type errors struct {
	testing.TB
	got []string
}

func (e *errors) Errorf(format string, args ...any) {
	e.got = append(e.got, fmt.Sprintf(format, args...))
}
func (e *errors) Helper() {}

// DeclaredTests returns a suite's tests and fails one that declares no plan item or does not start
// with mc.Begin; the TestPlan tests declare none.
func TestDeclaredTestsFindsAnUndeclaredOrUnbegunTest(t *testing.T) {
	dir := t.TempDir()
	suite := `package s
var _ = planned.Add("TestGood", nil, item)
func TestGood(t *testing.T) { ctx := mc.Begin(t); _ = ctx }
func TestUndeclared(t *testing.T) { ctx := mc.Begin(t); _ = ctx }
var _ = planned.Add("TestUnbegun", nil, item)
func TestUnbegun(t *testing.T) { ctx := mc.Context(t); _ = ctx }
func TestPlanSomething(t *testing.T) {}
func helper() {}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s_test.go"), []byte(suite), 0o600))
	t.Chdir(dir)
	e := &errors{TB: t}
	assert.Equal(t, []string{"TestGood", "TestUndeclared", "TestUnbegun"}, DeclaredTests(e))
	require.Len(t, e.got, 2, "%q", e.got)
	assert.Contains(t, e.got[0], "TestUndeclared declares no plan item")
	assert.Contains(t, e.got[1], "TestUnbegun does not start with mc.Begin(t)")
}
