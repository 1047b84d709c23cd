package proc

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStopParallelRunsAllAtOnce(t *testing.T) {
	var stopped atomic.Int32
	start := time.Now()
	// One after another would take 1.5 s; at once 0.5 s, with 0.9 s of slack for a host that
	// runs four test packages at once.
	StopParallel([]time.Duration{500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}, func(d time.Duration) {
		time.Sleep(d)
		stopped.Add(1)
	})
	assert.Equal(t, int32(3), stopped.Load(), "every item stopped before it returns")
	assert.Less(t, time.Since(start), 1400*time.Millisecond, "in parallel, not one after another")
}
