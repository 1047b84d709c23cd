package env

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/provider/local"
)

// suiteEnvVar makes this test binary act as a suite (TestMain runs Run), for the tests that watch
// how a suite ends.
const suiteEnvVar = "AMBIENTMC_ENV_AS_SUITE"

var asSuite *Env

func TestMain(m *testing.M) {
	if os.Getenv(suiteEnvVar) == "1" {
		os.Exit(Run(m, &asSuite))
	}
	os.Exit(m.Run())
}

// TestHangsUntilTimeout only runs inside the suite started by TestTimeoutWritesPartialReport.
func TestHangsUntilTimeout(t *testing.T) {
	if asSuite == nil {
		t.Skip("runs only as the child of TestTimeoutWritesPartialReport")
	}
	asSuite.Report.Warnings = append(asSuite.Report.Warnings, "measured something before hanging")
	time.Sleep(time.Hour)
}

// TestTimeoutWritesPartialReport runs a one-cluster suite that hangs until go test's -timeout
// panics: the report so far is written with a warning, the run directory is kept and printed, and
// no process of the run is left.
func TestTimeoutWritesPartialReport(t *testing.T) {
	if _, missing, err := local.NewIfBuilt(local.Options{}); err != nil || len(missing) > 0 {
		t.Skipf("needs the cached binaries (make bins): missing %v %v", missing, err)
	}
	reportDir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHangsUntilTimeout$", "-test.timeout=60s", "-clusters=1", "-report-dir="+reportDir)
	cmd.Env = append(os.Environ(), suiteEnvVar+"=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the child panics on its timeout:\n%s", out)
	assert.Contains(t, string(out), "panic: test timed out")
	assert.Contains(t, string(out), "run cut short (about to hit go test's -timeout=1m0s)")

	m := regexp.MustCompile(`logs kept in (\S+)`).FindSubmatch(out)
	require.NotNil(t, m, "the run directory is printed:\n%s", out)
	runDir := string(m[1])
	t.Cleanup(func() { os.RemoveAll(runDir) })
	entries, err := os.ReadDir(filepath.Join(runDir, "clusters", "cluster-1"))
	require.NoError(t, err, "the run directory is kept")
	assert.NotEmpty(t, entries)

	raw, err := os.ReadFile(filepath.Join(reportDir, "report.json"))
	require.NoError(t, err, "the partial report is written")
	var rep struct{ Warnings []string }
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.Contains(t, rep.Warnings, "measured something before hanging", "what the report held is kept")
	assert.Contains(t, rep.Warnings[len(rep.Warnings)-1], "the run was cut short")

	// Pdeathsig ends the child's processes with it.
	waitNoProcesses(t, runDir)
}

// waitNoProcesses fails the test if a process mentioning runDir outlives its run by 10 s.
func waitNoProcesses(t *testing.T, runDir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := processesMentioning(runDir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the run in %s still running: %v", runDir, pids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// processesMentioning lists the PIDs whose command line contains s.
func processesMentioning(s string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}

// TestInterruptWritesPartialReport sends Ctrl-C (SIGINT) to a one-cluster suite in the middle of
// a test: the report so far is written with a warning, the run directory is kept, and no process
// of the run is left.
func TestInterruptWritesPartialReport(t *testing.T) {
	if _, missing, err := local.NewIfBuilt(local.Options{}); err != nil || len(missing) > 0 {
		t.Skipf("needs the cached binaries (make bins): missing %v %v", missing, err)
	}
	reportDir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.v", "-test.run=^TestHangsUntilTimeout$", "-test.timeout=5m", "-clusters=1", "-report-dir="+reportDir)
	cmd.Env = append(os.Environ(), suiteEnvVar+"=1")
	var out proc.LogBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(out.String(), "=== RUN   TestHangsUntilTimeout") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the child never reached its test:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // let it record its warning
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	require.Error(t, err, "an interrupted run exits non-zero")
	assert.Contains(t, out.String(), "run cut short (interrupted by interrupt)")

	m := regexp.MustCompile(`logs kept in (\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, "the run directory is printed:\n%s", out.String())
	t.Cleanup(func() { os.RemoveAll(m[1]) })
	_, err = os.Stat(filepath.Join(m[1], "clusters"))
	require.NoError(t, err, "the run directory is kept")

	raw, err := os.ReadFile(filepath.Join(reportDir, "report.json"))
	require.NoError(t, err, "the partial report is written")
	var rep struct{ Warnings []string }
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.Contains(t, rep.Warnings, "measured something before hanging")
	assert.Contains(t, rep.Warnings[len(rep.Warnings)-1], "interrupted by interrupt")
	waitNoProcesses(t, m[1])
}
