package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// niceOf reads a thread's nice value from /proc (field 19 of stat).
func niceOf(t *testing.T, pid, tid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(tid), "stat"))
	require.NoError(t, err)
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	n, err := strconv.Atoi(fields[16])
	require.NoError(t, err)
	return n
}

// A raised nice value (allowed to anyone) reaches every thread of a real Go process, which has
// several from its start.
func TestSetNiceReachesEveryThread(t *testing.T) {
	p := start(t, helperSpec(t, "niced", "block"))
	require.Eventually(t, func() bool { return p.LogContains("blocking") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, SetNice(p.Pid(), 7))
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p.Pid()), "task"))
	require.NoError(t, err)
	require.Greater(t, len(tasks), 1, "a Go process runs several threads")
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		require.NoError(t, err)
		assert.Equal(t, 7, niceOf(t, p.Pid(), tid), "thread %d", tid)
	}
	assert.Error(t, SetNice(1<<22, 0), "no such process")
}
