package measure

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A host istiod's CPU comes from the scheduler's counters of whichever process it is now: a
// restart in place (a new PID) reads the new process from zero.
func TestProcessCPUFollowsTheProcess(t *testing.T) {
	var pid atomic.Int64
	pid.Store(int64(os.Getpid()))
	cpu := ProcessCPU(func() int { return int(pid.Load()) })
	assert.Equal(t, SchedstatName, cpu.Name())
	mine, err := cpu.CPUSeconds(context.Background())
	require.NoError(t, err)
	assert.Positive(t, mine)

	sleeper := exec.Command("sleep", "5")
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	pid.Store(int64(sleeper.Process.Pid))
	fresh, err := cpu.CPUSeconds(context.Background())
	require.NoError(t, err)
	assert.Less(t, fresh, mine, "the new process's counters, not this test's")
}

func TestSyncStatusOf(t *testing.T) {
	cs := []ClusterInfo{{ID: "c1", SyncStatus: "synced"}, {ID: "c2", SyncStatus: StatusSyncing}}
	st, ok := SyncStatusOf(cs, "c2")
	assert.True(t, ok)
	assert.Equal(t, StatusSyncing, st)
	_, ok = SyncStatusOf(cs, "c3")
	assert.False(t, ok, "not listed")
}
