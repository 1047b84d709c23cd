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
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := processesMentioning(runDir)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the timed-out run still running: %v", pids)
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
