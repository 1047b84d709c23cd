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
	StopParallel([]time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}, func(d time.Duration) {
		time.Sleep(d)
		stopped.Add(1)
	})
	assert.Equal(t, int32(3), stopped.Load(), "every item stopped before it returns")
	assert.Less(t, time.Since(start), 500*time.Millisecond, "in parallel, not one after another")
}
