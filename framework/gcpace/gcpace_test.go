package gcpace

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitLeavesRoomAboveTheLiveHeap(t *testing.T) {
	const mb = 1 << 20
	assert.Equal(t, int64(20*mb+10*mb+MinHeadroom), Limit(10*mb, 20*mb), "a small heap gets the floor's room")
	assert.Equal(t, int64(20*mb+600*mb+300*mb), Limit(600*mb, 20*mb), "a large heap gets half of itself")
	for _, live := range []uint64{0, mb, 100 * mb, 4 << 30} {
		assert.Greater(t, Limit(live, 0), int64(live), "the limit sits above the live heap, or the collector would run without end")
	}
}

// The pacer lowers the process's limit from Go's default (none) to one that follows the live heap,
// and a heap that grows raises it.
func TestPacerFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	p := Start(10 * time.Millisecond)
	var small int64
	require.Eventually(t, func() bool { small = debug.SetMemoryLimit(-1); return small < math.MaxInt64 }, 5*time.Second, 10*time.Millisecond)
	held := make([][]byte, 0, 32)
	for range 32 {
		held = append(held, make([]byte, 8<<20)) // 256 MB live
	}
	runtime.GC()
	require.Eventually(t, func() bool { return debug.SetMemoryLimit(-1) > small+128<<20 }, 5*time.Second, 10*time.Millisecond,
		"256 MB more live heap raises the limit by more than half of it")
	runtime.KeepAlive(held)
	p.Stop()
	assert.Equal(t, before, debug.SetMemoryLimit(-1), "Stop puts back the limit the process had")
}

func TestAUsersGOMEMLIMITStays(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	before := debug.SetMemoryLimit(-1)
	p := Start(time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, before, debug.SetMemoryLimit(-1))
	p.Stop()
}
