package measure

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostCPUSeesABusyLoop(t *testing.T) {
	before, err := ReadHostCPU()
	require.NoError(t, err)
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	after, err := ReadHostCPU()
	require.NoError(t, err)
	busy := after.BusySince(before)
	// One spinning goroutine keeps at least one core busy; the host has at most a few dozen.
	assert.Greater(t, busy, 0.01)
	assert.LessOrEqual(t, busy, 1.0)
	assert.Zero(t, before.BusySince(after), "readings in the wrong order give zero, not garbage")
}
