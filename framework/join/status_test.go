package join

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// watchOf is a watch whose samples the test records itself, at the times given.
func watchOf(allowed time.Duration, samples ...statusSample) *StatusWatch {
	w := newStatusWatch(nil, "c2", allowed)
	w.samples = samples
	return w
}

func sampleAt(s float64, metric, clusterz string, want ...string) statusSample {
	return statusSample{at: time.Duration(s * float64(time.Second)), metric: metric, clusterz: clusterz, want: want, why: "known"}
}

func TestStatusWatchAllowsADisagreementShorterThanASyncPeriod(t *testing.T) {
	got := watchOf(time.Second,
		sampleAt(0, measure.StatusSynced, measure.StatusSynced, measure.StatusSynced),
		sampleAt(0.2, measure.StatusTimeout, measure.StatusTimeout, measure.StatusSynced),
		sampleAt(0.8, measure.StatusTimeout, measure.StatusTimeout, measure.StatusSynced),
		sampleAt(1.0, measure.StatusSynced, measure.StatusSynced, measure.StatusSynced),
	).judge()
	assert.Equal(t, 4, got.Samples)
	assert.Empty(t, got.Disagreements)
	assert.Contains(t, StatusText(got), "agreed with what the framework knew in all 4 samples")
}

func TestStatusWatchReportsALongDisagreement(t *testing.T) {
	got := watchOf(time.Second,
		sampleAt(0, measure.StatusTimeout, measure.StatusTimeout, measure.StatusSynced),
		sampleAt(0.6, measure.StatusTimeout, measure.StatusTimeout, measure.StatusSynced),
		sampleAt(1.2, measure.StatusTimeout, measure.StatusTimeout, measure.StatusSynced),
		// While a change is under way (no want) anything goes, but the metric and clusterz must agree.
		sampleAt(1.4, measure.StatusSyncing, measure.StatusSyncing),
		sampleAt(1.6, measure.StatusClosed, measure.StatusSynced),
		sampleAt(2.8, measure.StatusClosed, measure.StatusSynced),
	).judge()
	require.Len(t, got.Disagreements, 2)
	assert.Equal(t, "0.0-1.2s: istiod said timeout (clusterz timeout) while the framework knew synced (known)", got.Disagreements[0])
	assert.Contains(t, got.Disagreements[1], "1.6-2.8s: istiod said closed (clusterz synced)")
	assert.Contains(t, StatusText(got), "disagreed for longer than 1.0s")
}

// The sync-status check's known fault shows as disagreements that are all "closed" while clusterz
// says synced; any other disagreement beside them is another fault.
func TestOnlyDisagreedAs(t *testing.T) {
	closedOnly := watchOf(time.Second,
		sampleAt(0, measure.StatusClosed, measure.StatusSynced, measure.StatusSynced),
		sampleAt(1.2, measure.StatusClosed, measure.StatusSynced, measure.StatusSynced))
	closedOnly.judge()
	assert.True(t, closedOnly.OnlyDisagreedAs(measure.StatusClosed, measure.StatusSynced))

	both := watchOf(time.Second,
		sampleAt(0, measure.StatusTimeout, measure.StatusTimeout, measure.StatusSynced),
		sampleAt(1.2, measure.StatusTimeout, measure.StatusTimeout, measure.StatusSynced),
		sampleAt(1.4, measure.StatusClosed, measure.StatusSynced, measure.StatusSynced),
		sampleAt(2.6, measure.StatusClosed, measure.StatusSynced, measure.StatusSynced))
	both.judge()
	assert.False(t, both.OnlyDisagreedAs(measure.StatusClosed, measure.StatusSynced), "a timeout disagreement is another fault")

	agreed := watchOf(time.Second, sampleAt(0, measure.StatusSynced, measure.StatusSynced, measure.StatusSynced))
	agreed.judge()
	assert.False(t, agreed.OnlyDisagreedAs(measure.StatusClosed, measure.StatusSynced), "no disagreement is no fault")
}

func TestStatusWatchSaw(t *testing.T) {
	w := watchOf(time.Second, sampleAt(0, measure.StatusSyncing, "unread"))
	assert.True(t, w.Saw(measure.StatusSyncing))
	assert.False(t, w.Saw(measure.StatusTimeout))
	assert.Equal(t, time.Second, SyncPeriod(100*time.Millisecond))
	assert.Equal(t, 3*time.Second, SyncPeriod(3*time.Second))
}

func TestStatusOf(t *testing.T) {
	assert.Equal(t, "no scrape", StatusOf(nil, "c2"))
	m := &measure.Metrics{RemoteStatus: map[string]string{"c2": measure.StatusSynced, "c3": ""}}
	assert.Equal(t, measure.StatusSynced, StatusOf(m, "c2"))
	assert.Equal(t, StatusGone, StatusOf(m, "c3"))
	assert.Equal(t, "never seen", StatusOf(m, "c4"))
}

func TestWaitUntil(t *testing.T) {
	n := 0
	require.NoError(t, WaitUntil(context.Background(), time.Second, func() bool { n++; return n == 3 }))
	err := WaitUntil(context.Background(), 100*time.Millisecond, func() bool { return false })
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

func TestSettleCapGrowsWithTheClusters(t *testing.T) {
	assert.Less(t, SettleCap(300), SettleCap(1000))
	assert.Less(t, SettleCap(1000), SettleCap(4000))
}

// The fixed rule needs no istiod to decide its windows.
func TestFixedSettleRule(t *testing.T) {
	joinFlags := func(j expctx.Join) *expctx.Context {
		return &expctx.Context{Scale: workload.Scale{Pods: 300}, Flags: &expctx.Options{Join: j}}
	}
	s := NewSettler(nil, joinFlags(expctx.Join{Settle: 3 * time.Second, Steady: 5 * time.Second}))
	assert.True(t, s.Fixed)
	assert.Equal(t, 3*time.Second, s.SteadyWindow(), "the steady window fits inside the settle")
	assert.Contains(t, s.Rule(), "fixed: 3s after convergence")
	s = NewSettler(nil, joinFlags(expctx.Join{Steady: time.Second}))
	assert.Equal(t, SettleCap(300), s.Settle, "settle defaults to the scale's cap")
	assert.Equal(t, 15, XDSClients(0, 4000))
	assert.Equal(t, 1, XDSClients(0, 300))
	assert.Equal(t, 4, XDSClients(4, 4000))
}
