package env

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusing is an extension whose Check refuses the run (as CI's does for a bad -gates file).
type refusing struct{ Extension }

func (refusing) Check(*Env) error { return errors.New("-gates=x: refused") }

// An extension's bad input is refused before any cluster, run directory or report exists.
func TestExtensionCheckRunsBeforeAnythingStarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	e := &Env{Log: io.Discard, Flags: flagsWith(func(f *Flags) { f.Clusters = 2; f.ReportDir = dir }), ext: refusing{},
		start: time.Now(), run: newRunState(), setupTook: map[string]time.Duration{}}
	err := e.setup(t.Context(), Suite{})
	e.teardown()
	require.ErrorContains(t, err, "-gates=x: refused")
	assert.Empty(t, e.RunDir, "no run directory")
	_, statErr := os.Stat(dir)
	assert.True(t, os.IsNotExist(statErr), "no report directory for bad input")
}

func TestReportDirDefaults(t *testing.T) {
	art := filepath.Join(t.TempDir(), "artifacts")
	t.Setenv(ArtifactsEnv, art)
	got, err := ReportDir("")
	require.NoError(t, err)
	assert.Equal(t, art, got, "$ARTIFACTS is the default")
	_, err = os.Stat(art)
	assert.NoError(t, err, "and it is created")
	got, err = ReportDir("/explicit")
	require.NoError(t, err)
	assert.Equal(t, "/explicit", got, "-report-dir wins over $ARTIFACTS")
	t.Setenv(ArtifactsEnv, "")
	a, err := ReportDir("")
	require.NoError(t, err)
	b, err := ReportDir("")
	require.NoError(t, err)
	defer os.Remove(a)
	defer os.Remove(b)
	assert.NotEqual(t, a, b, "two runs never share a default directory")
	assert.True(t, strings.HasPrefix(a, filepath.Join(os.TempDir(), "ambientmc-reports")+"/"), a)
}
