package measure

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPeakMemorySeesAnAllocation(t *testing.T) {
	before, err := HostMemoryInUse()
	require.NoError(t, err)
	require.Positive(t, before)
	p := WatchPeakMemory(10 * time.Millisecond)
	defer p.Stop()
	// Touch 512 MB so the kernel really hands out the pages; the peak must see them.
	buf := make([]byte, 512<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	time.Sleep(50 * time.Millisecond)
	peak := p.Peak()
	buf[len(buf)-1] = 1 // keep buf alive until after the read
	assert.Greater(t, peak, before+256<<20, "peak %d MB vs %d MB before", peak>>20, before>>20)
}
