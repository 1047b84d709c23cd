package join

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// With a CPU source counting in 10 ms (an in-cluster istiod's process_cpu_seconds_total), an idle
// istiod's two steps in a tick read slightly short stay quiet; three steps in a tick do not.
func TestQuietLimitClearsTwoStepsOfJitter(t *testing.T) {
	const res = 0.01
	tick := QuietTick.Seconds()
	limit := quietLimit(res)
	assert.LessOrEqual(t, 2*res/(tick*0.975), limit, "two steps over a tick read 2.5%% short")
	assert.Greater(t, 3*res/tick, limit, "three steps in a tick are not idle")
	assert.Equal(t, provisionalLimit, quietLimit(0.0001), "a fine source keeps the provisional limit")
}
