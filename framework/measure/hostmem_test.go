package measure

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostMemoryInUseIsPlausible(t *testing.T) {
	used, err := HostMemoryInUse()
	require.NoError(t, err)
	total := totalRAM(t)
	assert.Positive(t, used)
	assert.Less(t, used, total, "in use is below MemTotal")
}

// TestPeakMemoryKeepsTheHighest feeds the sampler a rising and falling series (the host's real
// memory moves with everything else running, so it cannot be the test's input): the peak is the
// highest value seen, not the latest, and read errors are skipped rather than counted as 0.
func TestPeakMemoryKeepsTheHighest(t *testing.T) {
	var mu sync.Mutex
	series := []uint64{100, 300, 900, 200}
	i := 0
	done := make(chan struct{})
	read := func() (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		if i >= len(series) {
			select {
			case <-done:
			default:
				close(done)
			}
			return 0, errors.New("no more readings")
		}
		v := series[i]
		i++
		return v, nil
	}
	p := watchPeak(time.Millisecond, read)
	<-done
	p.Stop()
	assert.Equal(t, uint64(900), p.Peak())
}

func totalRAM(t *testing.T) uint64 {
	t.Helper()
	m, err := readMeminfo()
	require.NoError(t, err)
	return m
}
