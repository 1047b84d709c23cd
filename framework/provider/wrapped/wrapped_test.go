package wrapped

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/provider/local"
	"github.com/ambientmc/ambientmc/framework/report"
)

// The join suite passes through a provider that lives in this folder alone, and its report names
// the provider and the data plane it declares.
func TestJoinSuiteRunsThroughTheWrappedProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the join suite in a child go test (minutes)")
	}
	if _, missing, err := local.NewIfBuilt(local.Options{}); err != nil {
		t.Fatal(err)
	} else if len(missing) > 0 {
		t.Skipf("binaries not built (%v): run `make bins`", missing)
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok { // fail with the child's output before this test's own timeout
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "test", "../../../suites/multicluster", "-v", "-count=1", "-timeout=15m",
		"-run", "^TestControlPlaneJoin$", "-provider="+Name, "-clusters=2", "-report-dir="+dir)
	cmd.Env = append(os.Environ(), "ARTIFACTS=") // the child leaves nothing in a CI's artifacts
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test %s:\n%s", strings.Join(cmd.Args[2:], " "), tail(out, 60))
	require.Contains(t, string(out), "--- PASS: TestControlPlaneJoin", "the join test ran and passed, not skipped:\n%s", tail(out, 60))

	r, err := report.Read(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err, "report.json validates with a provider name of its own")
	assert.Equal(t, Name, r.Provider)
	assert.Equal(t, report.DataPlaneEmulated, r.DataPlane, "the data plane the provider declares")
	require.NotNil(t, r.ControlPlane, "the join suite measured istiod")
	assert.Len(t, r.ControlPlane.Joins, 1, "one remote joined the observed istiod")
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
