package env

import (
	"context"
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
		os.Exit(Run(m, &asSuite, Suite{}))
	}
	os.Exit(m.Run())
}

// TestHangsUntilTimeout only runs inside the suites started by the tests below: it ignores its
// context and sleeps past any timeout, as a stuck suite would.
func TestHangsUntilTimeout(t *testing.T) {
	if asSuite == nil {
		t.Skip("runs only as the child of TestTimeoutWritesPartialReport")
	}
	asSuite.Context(t)
	asSuite.Report.Warnings = append(asSuite.Report.Warnings, "measured something before hanging")
	time.Sleep(time.Hour)
}

// TestWaitsOnItsContext only runs inside TestCutShortEndsTheRunningTest: a suite that waits on its
// context, as every wait of the suites does.
func TestWaitsOnItsContext(t *testing.T) {
	if asSuite == nil {
		t.Skip("runs only as the child of TestCutShortEndsTheRunningTest")
	}
	ctx := asSuite.Context(t)
	asSuite.Report.Warnings = append(asSuite.Report.Warnings, "measured something before waiting")
	<-ctx.Done()
	t.Fatalf("stopped waiting: %v", context.Cause(ctx))
}

// childTimeout is the children's -timeout: its 10 s margin puts the cut 10 s after their test
// starts (a one-cluster setup comes before, outside the timeout). The children mostly wait, so
// the tests that run them run in parallel.
const childTimeout = 20 * time.Second

// runChild runs this test binary as a one-cluster suite that runs test under go test's -timeout,
// and returns its output and exit error.
func runChild(t *testing.T, test, reportDir string) (string, error) {
	t.Helper()
	if _, missing, err := local.NewIfBuilt(local.Options{}); err != nil || len(missing) > 0 {
		t.Skipf("needs the cached binaries (make bins): missing %v %v", missing, err)
	}
	cmd := exec.Command(os.Args[0], "-test.v", "-test.run=^"+test+"$", "-test.timeout="+childTimeout.String(), "-clusters=1", "-report-dir="+reportDir)
	cmd.Env = append(os.Environ(), suiteEnvVar+"=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runCutShort runs test in a child suite that the plan's margin cuts short, checks what every
// cut-short run must leave, and returns the child's output. It must leave a non-zero exit without
// a goroutine dump, the cut message naming the test, the partial report with measured (what the
// test had put in it), the run directory kept and printed, and no process of the run.
func runCutShort(t *testing.T, test, measured string) string {
	t.Helper()
	reportDir := t.TempDir()
	out, err := runChild(t, test, reportDir)
	require.Error(t, err, "a cut-short run exits non-zero:\n%s", out)
	assert.NotContains(t, out, "panic: test timed out", "the run ends before go test's timeout panics")
	assert.NotContains(t, out, "goroutine ", "no goroutine dump")
	assert.Regexp(t, `run cut short: the plan's margin before go test's -timeout=`+childTimeout.String()+` was used up, in `+test+` after \d`, out)
	assert.Contains(t, out, "partial report: "+reportDir+"/report.md")

	m := regexp.MustCompile(`run directory \(logs\): (\S+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "the run directory is printed:\n%s", out)
	runDir := m[1]
	t.Cleanup(func() { os.RemoveAll(runDir) })
	entries, err := os.ReadDir(filepath.Join(runDir, "clusters", "cluster-1"))
	require.NoError(t, err, "the run directory is kept")
	assert.NotEmpty(t, entries)

	raw, err := os.ReadFile(filepath.Join(reportDir, "report.json"))
	require.NoError(t, err, "the partial report is written")
	var rep struct {
		Warnings []string
		Plan     struct{ Items []struct{ Name string } }
	}
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.Contains(t, rep.Warnings, measured, "what the report held is kept")
	assert.Condition(t, func() bool {
		for _, w := range rep.Warnings {
			if strings.Contains(w, "the run was cut short") {
				return true
			}
		}
		return false
	}, "the report says it was cut short: %v", rep.Warnings)
	// Pdeathsig ends the child's processes with it, and teardown before that.
	waitNoProcesses(t, runDir)
	return out
}

// TestTimeoutWritesPartialReport runs a one-cluster suite whose test hangs, ignoring its context,
// past go test's -timeout: the run is cut at its plan's margin, stopped and exited before go test
// could print a goroutine dump.
func TestTimeoutWritesPartialReport(t *testing.T) {
	t.Parallel()
	out := runCutShort(t, "TestHangsUntilTimeout", "measured something before hanging")
	assert.Contains(t, out, "the tests did not stop within 5s of the cut: stopping everything and exiting")
}

// TestCutShortEndsTheRunningTest: a test that waits on its context fails with the cut's cause at
// the plan's margin, and the run ends through its normal teardown.
func TestCutShortEndsTheRunningTest(t *testing.T) {
	t.Parallel()
	out := runCutShort(t, "TestWaitsOnItsContext", "measured something before waiting")
	assert.Contains(t, out, "--- FAIL: TestWaitsOnItsContext")
	assert.Contains(t, out, "stopped waiting: run cut short: the plan's margin")
	assert.NotContains(t, out, "did not stop within", "it stopped by itself")
}

// waitNoProcesses fails the test if a process mentioning runDir outlives its run by 10 s.
func waitNoProcesses(t *testing.T, runDir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := proc.Mentioning(runDir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the run in %s still running: %v", runDir, pids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestInterruptWritesPartialReport sends Ctrl-C (SIGINT) to a one-cluster suite in the middle of
// a test: the report so far is written with a warning, the run directory is kept, and no process
// of the run is left.
func TestInterruptWritesPartialReport(t *testing.T) {
	t.Parallel()
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
	assert.Contains(t, out.String(), "run cut short (interrupted by interrupt, in TestHangsUntilTimeout after")

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
