package subtest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Three cases that each wait for all three to have started can only end if they run at once.
func TestCasesRunAtOnce(t *testing.T) {
	var started atomic.Int32
	wait := func(t *testing.T) {
		started.Add(1)
		deadline := time.Now().Add(10 * time.Second)
		for started.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		assert.EqualValues(t, 3, started.Load(), "every case started while this one waited")
	}
	Concurrently(t, Case{"a", wait}, Case{"b", wait}, Case{"c", wait})
}
