package measure

import (
	"context"
	"fmt"
	"time"
)

// DefaultPoll is used when a wait is given a non-positive poll interval.
const DefaultPoll = 100 * time.Millisecond

// WaitRemoteSynced polls istiod until istiod_remote_cluster_sync_status{cluster=cluster,
// status="synced"} is 1, and returns the time from the call to the scrape that saw it (so the
// result is late by at most one poll interval; call it right after creating the remote secret).
//
// A "timeout" status (PILOT_REMOTE_CLUSTER_TIMEOUT passed) does not end the wait: istiod keeps
// syncing and reports "synced" if it gets there. Failed scrapes are retried until ctx ends. On
// ctx end the error names the istiod, the cluster and the last status seen, and wraps ctx.Err().
func (i *Sampler) WaitRemoteSynced(ctx context.Context, cluster string, poll time.Duration) (time.Duration, error) {
	return i.wait(ctx, cluster, poll, "synced", func(m *Metrics) (bool, error) {
		return m.RemoteSync[cluster], nil
	})
}

// WaitRemoteGone polls istiod until it no longer manages cluster, and returns the time from the
// call to the scrape that saw it.
//
// Gone means every istiod_remote_cluster_sync_status series of the cluster is 0. That is the last
// step of istiod's deleteCluster (pkg/kube/multicluster/secretcontroller.go): Stop() first sets
// status="closed" to 1, then the per-cluster handlers are removed, then the cluster store entry,
// then clearClusterSyncState zeroes all four statuses. istiod never deletes the series, so a
// cluster with no series at all was never managed by this istiod (or istiod restarted): that is an
// error right away rather than a success, so that a wrong cluster name cannot pass for a leave.
// istiod_managed_clusters{cluster_type="remote"} is not used: it is a count, set after the
// zeroing, and cannot say which cluster left.
func (i *Sampler) WaitRemoteGone(ctx context.Context, cluster string, poll time.Duration) (time.Duration, error) {
	return i.wait(ctx, cluster, poll, "gone", func(m *Metrics) (bool, error) {
		st, known := m.RemoteStatus[cluster]
		if !known {
			return false, fmt.Errorf("istiod %s: cluster %s was never managed by this istiod (or istiod restarted): %s",
				i.Name, cluster, m.summary(cluster))
		}
		return st == "", nil
	})
}

// wait scrapes every poll until done reports true or an error, or ctx ends.
func (i *Sampler) wait(ctx context.Context, cluster string, poll time.Duration, what string, done func(*Metrics) (bool, error)) (time.Duration, error) {
	start := time.Now()
	if poll <= 0 {
		poll = DefaultPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var (
		last    *Metrics
		lastErr error
		scrapes int
	)
	for {
		m, err := i.Scrape(ctx)
		scrapes++
		if err == nil {
			last, lastErr = m, nil
			ok, err := done(m)
			if err != nil {
				return time.Since(start), err
			}
			if ok {
				return m.At.Sub(start), nil
			}
		} else if ctx.Err() == nil {
			// Remember it for the error: a scrape that keeps failing explains the wait.
			lastErr = err
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("istiod %s: cluster %s not %s after %v (%d scrapes): last seen: %s",
				i.Name, cluster, what, time.Since(start).Round(time.Millisecond), scrapes, last.summary(cluster))
			if lastErr != nil {
				msg += fmt.Sprintf("; last scrape failed: %v", lastErr)
			}
			// Wrap ctx.Err() so errors.Is(err, context.DeadlineExceeded) holds, and a custom cause too.
			if cause := context.Cause(ctx); cause != ctx.Err() {
				return time.Since(start), fmt.Errorf("%s: %w: %w", msg, ctx.Err(), cause)
			}
			return time.Since(start), fmt.Errorf("%s: %w", msg, ctx.Err())
		case <-t.C:
		}
	}
}
