package istiodcheck

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/churn"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/faults"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/topology"
)

// outageLength is how long the remote API server stays unreachable; reflectorBackoff is the
// longest client-go's reflectors wait between relists, which a change made meanwhile may wait
// for once it is back, before istiod does the work the first join measured.
const (
	outageLength     = 4 * time.Second
	reflectorBackoff = 30 * time.Second
)

// RemoteOutage takes a remote API server away from an isolated istiod (every connection to
// it refused, as when it is down) and brings it back: istiod must keep serving the remote's last
// state, say "synced" throughout (it had listed the remote), and show a change made during the
// outage soon after the API server is back. ctl is nil, or the control to run.
func (r *Run) RemoteOutage(t *testing.T, ctx context.Context, obs, remote *cluster.Cluster, ctl *Control) {
	iso := r.Isolated(t, ctx, obs)
	w := r.watch(t, ctx, obs, iso.Istiod)
	secret, proxy := iso.Slow(t, remote, remote.Name, faults.Delay{})
	start := time.Now()
	iso.Add(t, secret)
	_, _, err := join.WaitStatus(ctx, iso.Istiod, remote.Name, measure.StatusSynced, r.Flags.Join.Timeout)
	require.NoError(t, err)
	sw := join.WatchStatus(ctx, iso.Istiod, remote.Name, join.SyncPeriod(time.Since(start)))
	sw.Expect("the remote was listed", measure.StatusSynced)
	wctx, cancel := context.WithTimeout(ctx, r.Flags.Join.Timeout)
	defer cancel()
	require.NoError(t, w.WaitFor(wctx, iso.expect.Covers(remote)))
	window := Window{Undisturbed: time.Since(start)}
	changeWithin := reflectorBackoff + window.Duration()

	pods, err := churn.NewPods(ctx, r.Context, remote, nil, changeWithin)
	require.NoError(t, err)
	// What the client holds of service 0's endpoints in remote: the capacity of its split-horizon
	// workload on another network, its pod workloads on the client's own.
	capacity := func() string {
		if iso.expect.RelationTo(w, remote) == topology.SameNetwork {
			return fmt.Sprintf("%d pod workloads", w.PodWorkloads(remote.Name, join.IsScaleService))
		}
		keys, err := churn.SplitHorizonKeys(w.Addresses(), remote, r.Scale)
		if err != nil {
			return "none: " + err.Error() // the client lost the remote: a state the verdict judges
		}
		key := keys[0]
		return churn.StateOf(key, w.Addresses()[key])
	}
	was := capacity()

	proxy.SetDown(true)
	down := time.Now()
	if ctl.is(FaultForgottenDuringOutage) {
		w.Drop(ofRemote(obs, remote))
	}
	pd, err := pods.AddPod(ctx, 0) // the API server itself is up: the change is made, istiod cannot see it
	require.NoError(t, err)
	t.Cleanup(func() { _ = pods.RemovePod(context.Background(), pd) })
	join.SleepUntil(ctx, down.Add(outageLength))
	kept, during := w.SplitHorizonFor(remote.Network), capacity()
	keptState := iso.expect.Covers(remote)(w) && during == was
	proxy.SetDown(false)
	up := time.Now()
	w.Drop(nil) // the control's: what istiod sends next comes through again
	want := churn.Capacity(pods.Count(0))
	if iso.expect.RelationTo(w, remote) == topology.SameNetwork {
		want = fmt.Sprintf("%d pod workloads", r.Scale.Pods+1)
	}
	// The control's client dropped what it held of the remote, and istiod sends back only what
	// changes: waiting for the change would only run out the window once the verdict is given.
	seenErr := errors.New("not waited for: the control's client had lost the remote")
	if !ctl.is(FaultForgottenDuringOutage) {
		seenErr = join.WaitUntil(ctx, changeWithin, func() bool { return capacity() == want })
	}
	seen := time.Since(up)
	status := sw.Stop()

	passed := keptState && seenErr == nil && len(status.Disagreements) == 0
	detail := fmt.Sprintf("%s unreachable from istiod for %s: istiod kept serving it (%s at the end of the outage, %s before; %d split-horizon workloads), ",
		remote.Name, outageLength, during, was, kept.Workloads)
	if seenErr == nil {
		detail += fmt.Sprintf("and a pod added during the outage reached the client %.1fs after the API server was back (window %s: %s of reflector backoff + %s); ", seen.Seconds(), changeWithin, reflectorBackoff, window)
	} else {
		detail += fmt.Sprintf("but a pod added during the outage had not reached the client %s after it was back (still %s; the window is %s of reflector backoff + %s); ", changeWithin, capacity(), reflectorBackoff, window)
	}
	if ctl.is(FaultForgottenDuringOutage) {
		detail += string(FaultForgottenDuringOutage) + "; "
	}
	row := report.IstiodCheck{Name: RemoteOutage, Detail: detail + join.StatusText(status), Status: status}
	if seenErr == nil {
		row.ChangeSeenSeconds = report.F(seen.Seconds())
	}
	r.verdict(t, ctl, row, passed)
}
