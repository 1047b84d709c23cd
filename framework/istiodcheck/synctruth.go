package istiodcheck

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/faults"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
)

// syncTruthTimeout is PILOT_REMOTE_CLUSTER_TIMEOUT for the sync-status check: inside the slowed
// sync (SlowSync makes it several seconds), so istiod times out while still syncing.
const syncTruthTimeout = 1500 * time.Millisecond

// servedAfterTransfer bounds how long after the slowed transfer's last chunk istiod may take to
// serve the remote: the transfer's length grows with the remote's objects (the proxy sets it), the
// work after it is a join's, and WindowFloor covers that at every scale this check runs at.
const servedAfterTransfer = WindowFloor

// SyncStatusTruth watches istiod's sync status where it has been seen to lie. A remote sync slowed
// past PILOT_REMOTE_CLUSTER_TIMEOUT: "syncing", then "timeout" while it still syncs, are true;
// once istiod serves the remote's workloads it has listed them, and "synced" is the only truth
// (istio/istio#60082 kept reporting "timeout" there). Then the secret is rotated in place: while
// istiod swaps in the new cluster anything goes; once it serves the new one synced, the metric
// must say so too. The metric and /debug/clusterz must agree throughout. ctl is nil, or the
// control to run.
func (r *Run) SyncStatusTruth(t *testing.T, ctx context.Context, obs, remote *cluster.Cluster, ctl *Control) {
	iso := r.Isolated(t, ctx, obs, "PILOT_REMOTE_CLUSTER_TIMEOUT="+syncTruthTimeout.String())
	w := r.watch(t, ctx, obs, iso.Istiod)
	secret, proxy := iso.Slow(t, remote, remote.Name, SlowSync)
	sw := join.WatchStatus(ctx, iso.Istiod, remote.Name, join.SyncPeriod(0))
	sw.Expect("the secret is not written yet", join.StatusGone)
	start := time.Now()
	iso.Add(t, secret)
	if ctl.is(FaultStalledTransfer) {
		// The slowed transfer never ends: the remote is never listed, so never served.
		proxy.SetStalled(true)
		t.Cleanup(func() { proxy.SetStalled(false) })
	}
	sw.Expect("istiod is taking the secret up")
	require.NoError(t, join.WaitUntil(ctx, 10*time.Second, func() bool { return scrape(t, ctx, iso.Istiod).RemoteStatus[remote.Name] != "" }))
	sw.Expect("the slowed sync is under way", measure.StatusSyncing, measure.StatusTimeout)
	// The slowed sync lasts as long as the proxy's transfer; a remote not served well after the
	// transfer ended was dropped (the April istiod never retries a timed-out sync:
	// istio/istio#61296 fixed it).
	if !servedAfter(ctx, func() bool { return iso.expect.Covers(remote)(w) }, proxy.LastChunk, start, servedAfterTransfer) {
		status := sw.Stop()
		r.verdict(t, ctl, report.IstiodCheck{Name: SyncStatusTruth, Status: status, Evidence: []string{EvidenceNeverServed},
			Detail: fmt.Sprintf("a sync slowed past PILOT_REMOTE_CLUSTER_TIMEOUT=%s: istiod did not serve the remote within %s of the slowed transfer's end (%.1fs after the secret; the client holds %s; /debug/clusterz says %q): a timed-out sync that is never taken up again; %s",
				syncTruthTimeout, servedAfterTransfer, proxy.LastChunk().Sub(start).Seconds(), iso.expect.HeldOf(w, remote), clusterzStatus(ctx, iso.Istiod, remote.Name), join.StatusText(status))}, false)
		return
	}
	listed, moved := time.Since(start), proxy.LastChunk().Sub(start)
	sw.Expect("istiod serves the remote's workloads: it has listed them", measure.StatusSynced)
	join.SleepUntil(ctx, time.Now().Add(2*join.SyncPeriod(0)))
	timedOut := sw.Saw(measure.StatusTimeout)

	// An in-place rotation: the same server (the proxy, no longer slow), a fresh token.
	proxy.SetDelay(faults.Delay{})
	rotated, err := iso.Through(remote, remote.Name, proxy)
	require.NoError(t, err)
	events := secretEvents(t, ctx, iso.Istiod)
	how := "in place"
	sw.Expect("the secret was rotated: istiod swaps in the new cluster")
	if ctl.is(FaultRecreatedSecret) {
		how = "by deleting and recreating it"
		require.NoError(t, iso.Remove(secret))
		_, err = iso.Sampler().WaitRemoteGone(ctx, remote.Name, 50*time.Millisecond)
		require.NoError(t, err)
		_, err = iso.Secrets().Create(ctx, rotated, metav1.CreateOptions{})
	} else {
		_, err = iso.Secrets().Update(ctx, rotated, metav1.UpdateOptions{})
	}
	require.NoError(t, err)
	require.NoError(t, join.WaitUntil(ctx, r.Flags.Join.Timeout, func() bool { return secretEvents(t, ctx, iso.Istiod) > events }))
	wctx, cancel := context.WithTimeout(ctx, r.Flags.Join.Timeout)
	defer cancel()
	require.NoError(t, iso.Sampler().WaitClusterzSynced(wctx, remote.Name, 50*time.Millisecond))
	sw.Expect("istiod serves the rotated cluster synced (clusterz)", measure.StatusSynced)
	join.SleepUntil(ctx, time.Now().Add(2*join.SyncPeriod(0)))
	status := sw.Stop()
	var evidence []string
	if sw.OnlyDisagreedAs(measure.StatusClosed, measure.StatusSynced) {
		evidence = append(evidence, EvidenceClosedWhileSynced)
	}
	r.verdict(t, ctl, report.IstiodCheck{Name: SyncStatusTruth, Status: status, Evidence: evidence,
		Detail: fmt.Sprintf("a sync slowed past PILOT_REMOTE_CLUSTER_TIMEOUT=%s (istiod served the remote %.1fs after the secret, the slowed transfer having last moved at %.1fs, the window %s after that; it reported timeout on the way: %t), then a rotation %s: %s",
			syncTruthTimeout, listed.Seconds(), moved.Seconds(), servedAfterTransfer, timedOut, how, join.StatusText(status))},
		len(status.Disagreements) == 0)
}

// servedAfter waits until served, and says whether it was before a slowed transfer had stood
// still for quiet (lastMoved: when it last moved, zero before it started; counted from start then).
func servedAfter(ctx context.Context, served func() bool, lastMoved func() time.Time, start time.Time, quiet time.Duration) bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if served() {
			return true
		}
		moved := lastMoved()
		if moved.IsZero() {
			moved = start
		}
		if time.Since(moved) > quiet {
			return served()
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}
