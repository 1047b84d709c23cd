// Package cutshort runs the multicluster suite as a user would, through go test, with a suite
// forced past a short -timeout: the run must end on its own, cleanly, before go test's alarm.
package cutshort

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/provider/local"
)

// TestOverrunningSuiteEndsCleanly: -plan.factor=0.01 makes the plan believe a ten-minute churn
// window fits a 20-second -timeout (whose 10 s margin cuts the run 10 s into the tests); the run
// must cut TestChurn there with one message, write the partial report, stop every process and
// exit before go test's own kill.
func TestOverrunningSuiteEndsCleanly(t *testing.T) {
	if _, missing, err := local.NewIfBuilt(local.Options{}); err != nil || len(missing) > 0 {
		t.Skipf("needs the cached binaries (make bins): missing %v %v", missing, err)
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	reportDir := t.TempDir()
	start := time.Now()
	// Built as make ci-suite builds the suite (no DWARF, no vet pass): this checks the cut, not the code.
	cmd := exec.Command("go", "test", "-count=1", "-v", "-vet=off", "-ldflags=-w", "-timeout=20s", "./suites/multicluster",
		"-clusters=1", "-run=^TestChurn$", "-churn.cases=local", "-churn.modes=replace", "-churn.rates=5", "-churn.duration=10m",
		"-plan.factor=0.01", "-report-dir="+reportDir)
	cmd.Dir = root
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	elapsed := time.Since(start)

	require.Error(t, err, "a cut-short run fails:\n%s", out)
	assert.Contains(t, out, "estimates x0.01 by -plan.factor", "the plan says it was scaled")
	assert.Regexp(t, `run cut short: the plan's margin before go test's -timeout=20s was used up, in TestChurn after \d`, out)
	assert.Contains(t, out, "--- FAIL: TestChurn")
	assert.NotContains(t, out, "panic: test timed out", "the run ends before go test's alarm")
	assert.NotContains(t, out, "Test killed", "the run ends before go test's kill")
	assert.NotContains(t, out, "goroutine ", "no goroutine dump")
	assert.Less(t, elapsed, 2*time.Minute, "compiling the suite (cached by make bins), a one-cluster setup and a run cut inside -timeout=20s")

	var rep struct{ Warnings []string }
	b, err := os.ReadFile(filepath.Join(reportDir, "report.json"))
	require.NoError(t, err, "the partial report is written:\n%s", out)
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.True(t, containsAny(rep.Warnings, "the run was cut short"), "the report says it was cut short: %v", rep.Warnings)

	m := regexp.MustCompile(`run directory \(logs\): (\S+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "the run directory is printed:\n%s", out)
	t.Cleanup(func() { os.RemoveAll(m[1]) })
	assert.Empty(t, proc.Mentioning(m[1]), "every process of the run is stopped")
}

func containsAny(list []string, s string) bool {
	for _, v := range list {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}
