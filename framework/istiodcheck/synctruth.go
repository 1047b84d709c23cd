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

// slowlyServedWithin bounds how long after its secret the slowed remote must be served: its sync
// takes a few seconds.
const slowlyServedWithin = 30 * time.Second

// SyncStatusTruth watches istiod's sync status where it has been seen to lie. A remote sync slowed
// past PILOT_REMOTE_CLUSTER_TIMEOUT: "syncing", then "timeout" while it still syncs, are true;
// once istiod serves the remote's workloads it has listed them, and "synced" is the only truth
// (istio/istio#60082 kept reporting "timeout" there). Then the secret is rotated in place: while
// istiod swaps in the new cluster anything goes; once it serves the new one synced, the metric
// must say so too. The metric and /debug/clusterz must agree throughout.
func (r *Run) SyncStatusTruth(t *testing.T, ctx context.Context, obs, remote *cluster.Cluster) {
	iso := r.Isolated(t, ctx, obs, "PILOT_REMOTE_CLUSTER_TIMEOUT="+syncTruthTimeout.String())
	w := r.watch(t, ctx, obs, iso)
	secret, proxy := iso.Slow(t, remote, remote.Name, SlowSync)
	sw := join.WatchStatus(ctx, iso, remote.Name, join.SyncPeriod(0))
	sw.Expect("the secret is not written yet", join.StatusGone)
	start := time.Now()
	iso.Add(t, secret)
	sw.Expect("istiod is taking the secret up")
	require.NoError(t, join.WaitUntil(ctx, 10*time.Second, func() bool { return scrape(t, ctx, iso).RemoteStatus[remote.Name] != "" }))
	sw.Expect("the slowed sync is under way", measure.StatusSyncing, measure.StatusTimeout)
	wctx, cancel := context.WithTimeout(ctx, r.Join.Timeout)
	defer cancel()
	// The slowed sync takes a few seconds; a remote not served long after that was dropped (the
	// April istiod never retries a timed-out sync: istio/istio#61296 fixed it).
	sctx, scancel := context.WithTimeout(ctx, slowlyServedWithin)
	defer scancel()
	if err := w.WaitFor(sctx, iso.expect.Covers(remote)); err != nil {
		status := sw.Stop()
		r.verdict(t, report.IstiodCheck{Name: SyncStatusTruth, Status: status,
			Detail: fmt.Sprintf("a sync slowed past PILOT_REMOTE_CLUSTER_TIMEOUT=%s: istiod never served the remote within %s of its secret (the client holds %s; /debug/clusterz says %q): a timed-out sync that is never taken up again; %s",
				syncTruthTimeout, slowlyServedWithin, iso.expect.HeldOf(w, remote), clusterzStatus(ctx, iso, remote.Name), join.StatusText(status))}, false)
		return
	}
	listed := time.Since(start)
	sw.Expect("istiod serves the remote's workloads: it has listed them", measure.StatusSynced)
	join.SleepUntil(ctx, time.Now().Add(2*join.SyncPeriod(0)))
	timedOut := sw.Saw(measure.StatusTimeout)

	// An in-place rotation: the same server (the proxy, no longer slow), a fresh token.
	proxy.SetDelay(faults.Delay{})
	rotated, err := iso.Through(remote, remote.Name, proxy)
	require.NoError(t, err)
	events := secretEvents(t, ctx, iso)
	sw.Expect("the secret was rotated in place: istiod swaps in the new cluster")
	_, err = iso.Secrets().Update(ctx, rotated, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, join.WaitUntil(ctx, r.Join.Timeout, func() bool { return secretEvents(t, ctx, iso) > events }))
	require.NoError(t, iso.Sampler().WaitClusterzSynced(wctx, remote.Name, 50*time.Millisecond))
	sw.Expect("istiod serves the rotated cluster synced (clusterz)", measure.StatusSynced)
	join.SleepUntil(ctx, time.Now().Add(2*join.SyncPeriod(0)))
	status := sw.Stop()
	r.verdict(t, report.IstiodCheck{Name: SyncStatusTruth, Status: status,
		Detail: fmt.Sprintf("a sync slowed past PILOT_REMOTE_CLUSTER_TIMEOUT=%s (istiod served the remote %.1fs after the secret; it reported timeout on the way: %t), then an in-place rotation: %s",
			syncTruthTimeout, listed.Seconds(), timedOut, join.StatusText(status))},
		len(status.Disagreements) == 0)
}
