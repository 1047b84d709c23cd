// Package measuretest holds what tests of the settle logic share: a real process whose CPU bursts
// and then rests, read through a sampler (tests only).
package measuretest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/measure"
)

// Burner starts a real process that spins on a CPU (shell builtins only, so the CPU is its own)
// until busy has passed, then sleeps, and returns a sampler whose CPU source is that process's
// schedstat: the settle logic meets a real burst and a real quiet process. A burner with no busy
// time is returned once its shell has started its sleep and waits on it, using no CPU from then
// on: before that, its own start does, and on a busy host (four test packages at once) that
// reached 17 ms of CPU in a 200 ms tick.
func Burner(t *testing.T, busy time.Duration) *measure.Sampler {
	t.Helper()
	stop := filepath.Join(t.TempDir(), "stop")
	cmd := exec.Command("sh", "-c", `while [ ! -e "$1" ]; do :; done; sleep 60`, "burner", stop)
	require.NoError(t, cmd.Start())
	timer := time.AfterFunc(busy, func() { _ = os.WriteFile(stop, nil, 0o600) })
	t.Cleanup(func() { timer.Stop(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if busy == 0 {
		children := fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)
		require.Eventually(t, func() bool {
			data, err := os.ReadFile(children)
			return err == nil && len(strings.TrimSpace(string(data))) > 0
		}, 10*time.Second, 10*time.Millisecond, "the burner never started its sleep")
	}
	return &measure.Sampler{Name: "burner", CPU: measure.NewSchedstat(cmd.Process.Pid)}
}
