package env

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A person watching a run without -v sees the status lines and one line as each test starts and
// ends; the log (what go test shows with -v, in CI, in -json) gets the status lines only, as before.
func TestTerminalShowsStepsAndTests(t *testing.T) {
	var log, tty bytes.Buffer
	e := &Env{Log: &log, terminal: &tty, start: time.Now(), run: newRunState()}
	e.Statusf("clusters: done in %s", time.Second)
	e.Logf("workloads: cluster-1: 100/100 pods")
	t.Run("TestShown", func(t *testing.T) {
		e.trackTest(t, "TestShown") // what Context does for a top-level test
		t.Skip("skipped on purpose")
	})
	assert.Contains(t, log.String(), "clusters: done in 1s")
	assert.Contains(t, log.String(), "workloads: cluster-1")
	assert.NotContains(t, log.String(), "TestShown", "the log is what it was: go test -v names tests itself")
	out := tty.String()
	assert.Contains(t, out, "clusters: done in 1s")
	assert.NotContains(t, out, "workloads: cluster-1", "per-cluster detail stays in the log")
	assert.Regexp(t, `TestShown: running\n.*TestShown: SKIP in `, out)
}

// Under -v (and -json) the terminal is left alone; without it a terminal that can be opened is used.
func TestOpenTerminalOnlyWithoutVerbose(t *testing.T) {
	old := terminalPath
	t.Cleanup(func() { terminalPath = old })
	terminalPath = filepath.Join(t.TempDir(), "tty")
	require.NoError(t, os.WriteFile(terminalPath, nil, 0o600))
	tty := openTerminal(false)
	if testing.Verbose() {
		assert.Nil(t, tty)
		return
	}
	require.NotNil(t, tty)
	require.NoError(t, tty.Close())
	terminalPath = filepath.Join(t.TempDir(), "none")
	assert.Nil(t, openTerminal(false), "no terminal, nothing extra")
}
