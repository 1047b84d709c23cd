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
func sequenceServer(t *testing.T, states ...string) (*Sampler, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := int(n.Add(1))
		serveText(w, exposition(float64(k), 3e8, 2e8, states[min(k, len(states))-1]))
	}))
	return &Sampler{Name: "cluster-1", MetricsURL: srv.URL + "/metrics"}, &n
}

// waitContext bounds a wait to d, and to the test.
func waitContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestWaitRemoteSyncedReturnsOnFirstSyncedScrape(t *testing.T) {
	const poll = 20 * time.Millisecond
	i, scrapes := sequenceServer(t, fixtureBeforeJoin, fixtureSyncing, fixtureSyncing, fixtureSynced, fixtureSyncing)
	ctx := waitContext(t, 10*time.Second)

	start := time.Now()
	took, err := i.WaitRemoteSynced(ctx, "cluster-2", poll)
	require.NoError(t, err)
	// The 4th scrape is the first with status="synced"; the wait must stop there, three polls in.
	assert.Equal(t, int64(4), scrapes.Load())
	assert.GreaterOrEqual(t, took, 3*poll-5*time.Millisecond)
	assert.LessOrEqual(t, took, time.Since(start))
}

// A wait that runs out of time says what istiod showed last.
func TestWaitRemoteTimeoutSaysWhatWasSeen(t *testing.T) {
	for _, tc := range []struct {
		name          string
		wait          func(i *Sampler, ctx context.Context, cluster string, poll time.Duration) (time.Duration, error)
		state         string
		timeout, poll time.Duration
		want          []string
	}{
		{"synced", (*Sampler).WaitRemoteSynced, fixtureSyncing, 150 * time.Millisecond, 20 * time.Millisecond, []string{
			"istiod cluster-1", "cluster cluster-2 not synced", `status="syncing"} 1`, `istiod_managed_clusters{cluster_type="remote"} 1`}},
		{"gone", (*Sampler).WaitRemoteGone, fixtureClosing, 100 * time.Millisecond, 10 * time.Millisecond, []string{
			"istiod cluster-1: cluster cluster-2 not gone", `status="closed"} 1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, scrapes := sequenceServer(t, tc.state)
			_, err := tc.wait(i, waitContext(t, tc.timeout), "cluster-2", tc.poll)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Greater(t, scrapes.Load(), int64(1), "it polled rather than giving up after one scrape")
		})
	}
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
	i := &Sampler{Name: "cluster-1", MetricsURL: srv.URL}
	ctx := waitContext(t, 10*time.Second)
	_, err := i.WaitRemoteSynced(ctx, "cluster-2", 10*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n.Load())
}

func TestWaitRemoteSyncedTimeoutReportsScrapeFailure(t *testing.T) {
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	i := &Sampler{Name: "cluster-1", MetricsURL: srv.URL}
	ctx := waitContext(t, 100*time.Millisecond)
	_, err := i.WaitRemoteSynced(ctx, "cluster-2", 10*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "no successful scrape")
	assert.Contains(t, err.Error(), "503")
}

func TestWaitRemoteGoneWaitsForAllStatusesZero(t *testing.T) {
	// "closed" at 1 is the start of istiod's deleteCluster, not its end.
	i, scrapes := sequenceServer(t, fixtureSynced, fixtureClosing, fixtureClosing, fixtureGone)
	ctx := waitContext(t, 10*time.Second)
	_, err := i.WaitRemoteGone(ctx, "cluster-2", 10*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, int64(4), scrapes.Load())
}

func TestWaitRemoteGoneRejectsClusterIstiodNeverManaged(t *testing.T) {
	i, scrapes := sequenceServer(t, fixtureGone)
	ctx := waitContext(t, 10*time.Second)
	_, err := i.WaitRemoteGone(ctx, "cluster-9", 10*time.Millisecond)
	require.Error(t, err)
	assert.False(t, errors.Is(err, context.DeadlineExceeded), "must fail at once, not time out: %v", err)
	assert.Contains(t, err.Error(), "cluster-9")
	assert.Equal(t, int64(1), scrapes.Load())
}
