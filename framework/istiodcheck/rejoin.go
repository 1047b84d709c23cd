package istiodcheck

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"istio.io/istio/pkg/workloadapi"
)

// RejoinLongLived lets a remote cluster leave an isolated istiod and join it again, and checks
// that a stream opened before the leave gets it back as fast as a fresh one. ctl is nil, or the
// control to run.
func (r *Run) RejoinLongLived(t *testing.T, ctx context.Context, obs, remote *cluster.Cluster, ctl *Control) {
	istiod := r.Isolated(t, ctx, obs)
	old := r.watch(t, ctx, obs, istiod.Istiod)
	secret := istiod.Direct(t, remote, remote.Name)
	first := time.Now()
	istiod.Add(t, secret)
	wctx, cancel := context.WithTimeout(ctx, r.Flags.Join.Timeout)
	defer cancel()
	require.NoError(t, old.WaitFor(wctx, istiod.expect.Covers(remote)), "the stream gets %s before the leave", remote.Name)
	// How long the rejoined workloads, and the diagnostic's local pod, may take to reach a stream:
	// from the first join, undisturbed, at this run's scale.
	window := Window{Undisturbed: time.Since(first)}
	require.NoError(t, istiod.Remove(secret))
	_, err := istiod.Sampler().WaitRemoteGone(wctx, remote.Name, 50*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, old.WaitFor(wctx, istiod.expect.Lacks(remote)), "the stream loses %s after the leave", remote.Name)
	if ctl.is(FaultDroppedRejoin) {
		old.Drop(ofRemote(obs, remote))
	}

	start := time.Now()
	istiod.Add(t, istiod.Direct(t, remote, remote.Name))
	_, err = istiod.Sampler().WaitRemoteSynced(wctx, remote.Name, 50*time.Millisecond)
	require.NoError(t, err)
	fresh := r.watch(t, ctx, obs, istiod.Istiod)

	wctx, cancel = context.WithTimeout(ctx, window.Duration())
	defer cancel()
	freshErr := fresh.WaitFor(wctx, istiod.expect.Covers(remote))
	freshAt := time.Since(start)
	oldErr := old.WaitFor(wctx, istiod.expect.SameAs(fresh, remote))
	oldAt := time.Since(start)
	if freshErr != nil {
		r.broken(t, ctl, RejoinLongLived, fmt.Sprintf("a stream opened after the rejoin did not get %s within %s either (%v): not a long-lived stream's fault", remote.Name, window, freshErr))
	}
	// The diagnostic for a failure, run every time so that it is known to work: a local pod added
	// now must reach the fresh stream; whether it reaches the old one tells a dropped event from a
	// stalled stream.
	reached := r.localPodReaches(t, ctx, obs, window.Duration(), fresh, old)
	if !reached[0] {
		r.broken(t, ctl, RejoinLongLived, fmt.Sprintf("a local pod did not reach a fresh stream within %s: the diagnostic cannot tell anything", window))
	}
	if oldErr == nil {
		r.verdict(t, ctl, report.IstiodCheck{Name: RejoinLongLived, Detail: fmt.Sprintf("stream opened before the leave got %s's %d split-horizon workloads %.1fs after the rejoin (fresh stream %.1fs; window %s)",
			remote.Name, old.SplitHorizonFor(remote.Network).Workloads, oldAt.Seconds(), freshAt.Seconds(), window)}, true)
		return
	}
	sh, want := old.SplitHorizonFor(remote.Network), fresh.SplitHorizonFor(remote.Network)
	why := "istiod dropped the rejoin's event for this stream (it still gets local changes)"
	switch {
	case old.Reconnects() > 0:
		why = fmt.Sprintf("the stream broke and was re-established %d times", old.Reconnects())
	case !reached[1]:
		why = "the stream stalled (it gets no local change either)"
	}
	r.verdict(t, ctl, report.IstiodCheck{Name: RejoinLongLived, Detail: fmt.Sprintf("stream opened before the leave held %d of %d split-horizon workloads (capacity %d of %d) %s after the rejoin (the window), a fresh stream all of them in %.1fs: %s",
		sh.Workloads, want.Workloads, sh.Capacity, want.Capacity, window, freshAt.Seconds(), why)}, false)
}

// localPodReaches adds a ready pod of a global service in c and says, per watcher, whether it
// received the pod's workload within window; the pod is removed afterwards.
func (r *Run) localPodReaches(t *testing.T, ctx context.Context, c *cluster.Cluster, window time.Duration, ws ...*xdswatch.Watcher) []bool {
	t.Helper()
	ns, name := r.Scale.ServiceNamespace(0), "istiod-check-probe"
	// An address on node-0 past its scale pods (and past churn's first), taken as they were.
	node, err := c.Client.CoreV1().Nodes().Get(ctx, workload.NodeName(0), metav1.GetOptions{})
	require.NoError(t, err)
	ip, err := workload.PodIP(c, node, 0, (r.Scale.Pods+r.Scale.Nodes-1)/r.Scale.Nodes+1, r.Scale.Nodes)
	require.NoError(t, err)
	host, err := workload.InternalIP(ctx, c, node.Name)
	require.NoError(t, err)
	pods := c.Client.CoreV1().Pods(ns)
	p, err := pods.Create(ctx, workload.NewPod(ns, name, workload.ServiceName(0), workload.ServiceName(0), workload.NodeName(0)), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	require.NoError(t, workload.PatchPodStatus(ctx, c, p, workload.RunningStatus(ip, host, true)))
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	suffix := "/Pod/" + ns + "/" + name
	has := func(w *xdswatch.Watcher) bool {
		for k := range w.Addresses() {
			if strings.HasSuffix(k, suffix) {
				return true
			}
		}
		return false
	}
	out := make([]bool, len(ws))
	for k, w := range ws {
		out[k] = w.WaitFor(wctx, has) == nil
	}
	return out
}

// ofRemote matches what a client of obs's istiod holds of remote: its pods, and on another network
// its split-horizon workloads (the controls' dropped events).
func ofRemote(obs, remote *cluster.Cluster) func(string, *workloadapi.Address) bool {
	return func(_ string, a *workloadapi.Address) bool {
		w := a.GetWorkload()
		return w != nil && (w.GetClusterId() == remote.Name || remote.Network != obs.Network && w.GetNetwork() == remote.Network)
	}
}
