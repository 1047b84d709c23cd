package measure

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sequenceServer serves states[n] on the n-th scrape (1-based), repeating the last one, and counts
// scrapes: a stand-in for istiod whose metrics move as a join or leave proceeds.
func sequenceServer(t *testing.T, states ...string) (*Istiod, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := int(n.Add(1))
		serveText(w, exposition(float64(k), 3e8, 2e8, states[min(k, len(states))-1]))
	}))
	return &Istiod{Name: "cluster-1", MetricsURL: srv.URL + "/metrics"}, &n
}

func TestWaitRemoteSyncedReturnsOnFirstSyncedScrape(t *testing.T) {
	const poll = 20 * time.Millisecond
	i, scrapes := sequenceServer(t, fixtureBeforeJoin, fixtureSyncing, fixtureSyncing, fixtureSynced, fixtureSyncing)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	start := time.Now()
	took, err := i.WaitRemoteSynced(ctx, "cluster-2", poll)
	require.NoError(t, err)
	// The 4th scrape is the first with status="synced"; the wait must stop there, three polls in.
	assert.Equal(t, int64(4), scrapes.Load())
	assert.GreaterOrEqual(t, took, 3*poll-5*time.Millisecond)
	assert.LessOrEqual(t, took, time.Since(start))
}

func TestWaitRemoteSyncedTimeoutSaysWhatWasSeen(t *testing.T) {
	i, scrapes := sequenceServer(t, fixtureSyncing)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()

	_, err := i.WaitRemoteSynced(ctx, "cluster-2", 20*time.Millisecond)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Contains(t, err.Error(), "istiod cluster-1")
	assert.Contains(t, err.Error(), "cluster cluster-2 not synced")
	assert.Contains(t, err.Error(), `status="syncing"} 1`)
	assert.Contains(t, err.Error(), `istiod_managed_clusters{cluster_type="remote"} 1`)
	assert.Greater(t, scrapes.Load(), int64(1), "it polled rather than giving up after one scrape")
}

func TestWaitRemoteSyncedKeepsPollingThroughFailedScrapes(t *testing.T) {
	var n atomic.Int64
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		serveText(w, exposition(1, 3e8, 2e8, fixtureSynced))
	}))
	i := &Istiod{Name: "cluster-1", MetricsURL: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := i.WaitRemoteSynced(ctx, "cluster-2", 10*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n.Load())
}

func TestWaitRemoteSyncedTimeoutReportsScrapeFailure(t *testing.T) {
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	i := &Istiod{Name: "cluster-1", MetricsURL: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := i.WaitRemoteSynced(ctx, "cluster-2", 10*time.Millisecond)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Contains(t, err.Error(), "no successful scrape")
	assert.Contains(t, err.Error(), "503")
}

func TestWaitRemoteGoneWaitsForAllStatusesZero(t *testing.T) {
	// "closed" at 1 is the start of istiod's deleteCluster, not its end.
	i, scrapes := sequenceServer(t, fixtureSynced, fixtureClosing, fixtureClosing, fixtureGone)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := i.WaitRemoteGone(ctx, "cluster-2", 10*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, int64(4), scrapes.Load())
}

func TestWaitRemoteGoneTimeoutSaysWhatWasSeen(t *testing.T) {
	i, _ := sequenceServer(t, fixtureClosing)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := i.WaitRemoteGone(ctx, "cluster-2", 10*time.Millisecond)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Contains(t, err.Error(), "istiod cluster-1: cluster cluster-2 not gone")
	assert.Contains(t, err.Error(), `status="closed"} 1`)
}

func TestWaitRemoteGoneRejectsClusterIstiodNeverManaged(t *testing.T) {
	i, scrapes := sequenceServer(t, fixtureGone)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := i.WaitRemoteGone(ctx, "cluster-9", 10*time.Millisecond)
	require.Error(t, err)
	assert.False(t, errors.Is(err, context.DeadlineExceeded), "must fail at once, not time out: %v", err)
	assert.Contains(t, err.Error(), "cluster-9")
	assert.Equal(t, int64(1), scrapes.Load())
}
