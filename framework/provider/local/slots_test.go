package local

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/topology"
)

func TestSlotsAreExclusiveAcrossRuns(t *testing.T) {
	// Later tests in this package claim slots too: they must go back to the real directory, or
	// they recreate this one after its cleanup and leave it behind.
	saved := slotDir
	slotDir = t.TempDir()
	t.Cleanup(func() { slotDir = saved })
	first, err := claimSlots(3)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, first.indices)

	second, err := claimSlots(2)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 5}, second.indices, "a second run takes the next free indices")

	first.release()
	third, err := claimSlots(4)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 6}, third.indices, "released indices are reused")

	_, err = claimSlots(topology.MaxClusters)
	require.Error(t, err)
	free := topology.MaxClusters - 6 // 2 + 4 held
	assert.Contains(t, err.Error(), fmt.Sprintf("other runs on this machine hold all but %d", free))
	again, err := claimSlots(free)
	require.NoError(t, err, "a failed claim holds nothing")
	again.release()
	second.release()
	third.release()
}
