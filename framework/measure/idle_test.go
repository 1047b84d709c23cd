package measure_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/measure/measuretest"
)

func TestIdleBandOfAQuietProcess(t *testing.T) {
	i := measuretest.Burner(t, 0)
	b, err := i.IdleBand(context.Background(), 200*time.Millisecond, 5)
	require.NoError(t, err)
	assert.Less(t, b.Max, 0.01, "a sleeping process uses next to nothing")
	assert.InDelta(t, b.Max+0.01, b.Limit, 1e-9, "the limit is its maximum plus the floor (bandFloor)")
}
