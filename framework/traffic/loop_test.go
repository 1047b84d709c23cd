package traffic

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// switching stands in for the probes' data plane (the seam probe.Env, which needs a mesh):
// it answers from "a", fails, then answers from "b", as a failover looks from the client.
type switching struct{ calls atomic.Int64 }

func (s *switching) Request(ctx context.Context, app string) (string, error) {
	switch n := s.calls.Add(1); {
	case n <= 3:
		return "a", nil
	case n <= 5:
		return "", errors.New("connection reset")
	default:
		return "b", nil
	}
}

func TestLoopRecordsWhoAnswered(t *testing.T) {
	start := time.Now()
	l := Start(context.Background(), &switching{}, "echo", 5*time.Millisecond)
	took, err := l.FirstServedBy(context.Background(), "b", start, 5*time.Second)
	require.NoError(t, err)
	assert.Positive(t, took)
	l.Stop()
	l.Stop() // again: no effect
	counts := Count(l.Since(start))
	assert.EqualValues(t, 3, counts["a"])
	assert.EqualValues(t, 2, counts[""], "failures count under \"\"")
	assert.Positive(t, counts["b"])

	f := l.Figures(start, "b")
	assert.Equal(t, int(counts["a"]+counts[""]+counts["b"]), f.Requests)
	assert.EqualValues(t, counts["b"], f.Succeeded, "only b's answers count when b must serve")
	assert.Greater(t, f.LongestGapSeconds, 0.0)
	assert.Contains(t, Text(f), "requests (one every 5ms) succeeded")
	require.Len(t, f.Failures, 3, "the first failures, at most 3")
	assert.Contains(t, f.Failures[0], "served by a")
	assert.Contains(t, l.Since(start)[3].Err, "connection reset", "a failed request says why")
	assert.Contains(t, l.Figures(start, "a").Failures[0], "connection reset", "and the figures say it")
	assert.Contains(t, Text(f), "(failed: +")

	_, err = l.FirstServedBy(context.Background(), "c", start, 20*time.Millisecond)
	assert.ErrorContains(t, err, "no request was served by c")
}
