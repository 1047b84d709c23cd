package istiodcheck

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/traffic"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"istio.io/istio/pkg/workloadapi"
)

// DataPath is what the traffic checks drive: the probes, the client's cluster and its istiod (the
// suite's own), and the other cluster whose app they send to.
type DataPath struct {
	Probes probe.Env
	Local  *cluster.Cluster
	Istiod *mesh.Istiod
	Target *cluster.Cluster
	App    string
	// RotateSecret writes a fresh token into Target's remote secret in Local, in place.
	RotateSecret func(ctx context.Context) error
	// TouchSecret rewrites that secret with the kubeconfig it holds (a label changes); RemoveRemote
	// takes Target out of the mesh. The controls' ways to keep the rotation's fault away, and to
	// inject one.
	TouchSecret, RemoveRemote func(ctx context.Context) error
	// RestartIstiod starts Local's killed istiod again in place; nil where the provider cannot
	// (mesh.Restartable).
	RestartIstiod func(ctx context.Context) error
}

// trafficInterval and trafficBaseline are Istio's TestMulticlusterRemoteSecretRotation's: a
// request every 500 ms, after 5 s of traffic before anything changes.
const (
	trafficInterval = 500 * time.Millisecond
	trafficBaseline = 5 * time.Second
)

// TrafficDuringRotation is Istio's TestMulticlusterRemoteSecretRotation against the suite's mesh:
// the target's secret in the client's cluster is rotated in place while requests flow to a service
// only the target serves; every request must succeed. ctl is nil, or the control to run.
func (r *Run) TrafficDuringRotation(t *testing.T, ctx context.Context, d DataPath, ctl *Control) {
	// A long-lived stream, as the client's ztunnel holds, counts every moment istiod withdraws all
	// of the remote from it: a failed request then is istiod's, one without it is not.
	w := r.watch(t, ctx, d.Local, d.Istiod)
	require.NoError(t, r.expect().WaitHolds(ctx, w, r.Flags.Join.Timeout, d.Target))
	withdrawals := countWithdrawals(w, ofRemote(d.Local, d.Target))
	start := time.Now()
	loop := traffic.Start(ctx, d.Probes, d.App, trafficInterval)
	defer loop.Stop()
	join.SleepUntil(ctx, start.Add(trafficBaseline))
	rotate, what := d.RotateSecret, "in-place rotations"
	switch {
	case ctl.is(FaultUnchangedKubeconfig):
		rotate, what = d.TouchSecret, "in-place rewrites with the kubeconfig unchanged"
	case ctl.is(FaultRemoteRemoved):
		rotate, what = d.RemoveRemote, "deletions (the remote left the mesh)"
	}
	for k := range r.Flags.Checks.Rotations {
		if ctl.is(FaultRemoteRemoved) && k > 0 {
			break // gone after the first
		}
		events := secretEvents(t, ctx, d.Istiod)
		require.NoError(t, rotate(ctx))
		require.NoError(t, join.WaitUntil(ctx, r.Flags.Join.Timeout, func() bool { return secretEvents(t, ctx, d.Istiod) > events }))
		if ctl.is(FaultRemoteRemoved) {
			join.SleepUntil(ctx, time.Now().Add(time.Second))
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, r.Flags.Join.Timeout)
		err := d.Istiod.Sampler().WaitClusterzSynced(wctx, d.Target.Name, 50*time.Millisecond)
		cancel()
		require.NoError(t, err)
		join.SleepUntil(ctx, time.Now().Add(time.Second))
	}
	join.SleepUntil(ctx, time.Now().Add(2*time.Second))
	loop.Stop()
	f := loop.Figures(start, d.Target.Name)
	require.Positive(t, f.Requests)
	detail := fmt.Sprintf("%d %s of %s's secret in %s: %s", r.Flags.Checks.Rotations, what, d.Target.Name, d.Local.Name, traffic.Text(f))
	var evidence []string
	if n := withdrawals(); n > 0 {
		detail += fmt.Sprintf("; istiod withdrew every workload of %s from a long-lived stream %d times and sent them back", d.Target.Name, n)
		evidence = append(evidence, EvidenceWithdrawnDuringRotation)
	}
	if f.Succeeded < f.Requests {
		// Which state is wrong: a stream opened now tells what istiod serves from what a long-lived
		// stream kept, and istiod's own view of the remote whether it thinks it serves it.
		fresh := r.watch(t, ctx, d.Local, d.Istiod)
		status := clusterzStatus(ctx, d.Istiod, d.Target.Name)
		detail += fmt.Sprintf("; a stream opened after the rotations holds %s; /debug/clusterz says %s", r.expect().HeldOf(fresh, d.Target), status)
		if status == measure.StatusSynced && !r.expect().Holds(d.Target)(fresh) {
			evidence = append(evidence, EvidenceSyncedButUnserved)
		}
	}
	r.verdict(t, ctl, report.IstiodCheck{Name: TrafficDuringRotation, Traffic: f, Detail: detail, Evidence: evidence}, f.Succeeded == f.Requests)
}

// TrafficDuringRestart kills the client's istiod and starts it again while requests flow: the
// data plane keeps its last config, so every request succeeds, and the ztunnel-like clients hold
// again what they held once istiod is back. ctl is nil, or the control to run.
func (r *Run) TrafficDuringRestart(t *testing.T, ctx context.Context, d DataPath, ctl *Control) {
	if d.RestartIstiod == nil {
		t.Skipf("this provider cannot restart istiod %s in place", d.Local.Name)
	}
	w := r.watch(t, ctx, d.Local, d.Istiod)
	require.NoError(t, r.expect().WaitHolds(ctx, w, r.Flags.Join.Timeout, d.Target))
	before := len(w.Addresses())
	start := time.Now()
	loop := traffic.Start(ctx, d.Probes, d.App, trafficInterval/5)
	defer loop.Stop()
	join.SleepUntil(ctx, start.Add(2*time.Second))
	require.NoError(t, d.Istiod.Kill())
	killed := time.Now()
	if ctl.is(FaultNotRestarted) {
		// Started again only once the check has given its verdict, for the tests after it.
		t.Cleanup(func() { require.NoError(t, d.RestartIstiod(ctx)) })
	} else {
		require.NoError(t, d.RestartIstiod(ctx))
	}
	back := time.Now()
	// How long the restarted istiod may take to serve the remote networks again: from its own
	// restart at this run's scale (it lists every remote cluster afresh, as serving them needs).
	window := Window{Undisturbed: back.Sub(killed)}
	wctx, cancel := context.WithTimeout(ctx, window.Duration())
	defer cancel()
	if err := w.WaitFor(wctx, func(w *xdswatch.Watcher) bool {
		return w.Reconnects() > 0 && !w.LastSync().IsZero() && r.expect().Holds(d.Target)(w)
	}); err != nil {
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		loop.Stop()
		f := loop.Figures(start, d.Target.Name)
		how := "killed and started again"
		if ctl.is(FaultNotRestarted) {
			how = "killed and not started again within the window"
		}
		r.verdict(t, ctl, report.IstiodCheck{Name: TrafficDuringRestart, Traffic: f,
			Detail: fmt.Sprintf("istiod %s %s: the ztunnel-like client did not hold %s's network within %s of istiod being ready (%d reconnects; it holds %s); %s",
				d.Local.Name, how, d.Target.Name, window, w.Reconnects(), r.expect().HeldOf(w, d.Target), traffic.Text(f))}, false)
		return
	}
	reconverge := time.Since(back)
	join.SleepUntil(ctx, time.Now().Add(2*time.Second))
	loop.Stop()
	f := loop.Figures(start, d.Target.Name)
	r.verdict(t, ctl, report.IstiodCheck{Name: TrafficDuringRestart, Traffic: f, ReconvergeSeconds: report.F(reconverge.Seconds()),
		Detail: fmt.Sprintf("istiod %s killed and started again: %s; the ztunnel-like client held %s's network again %.2fs after istiod was ready (window %s; %d resources before, %d after)",
			d.Local.Name, traffic.Text(f), d.Target.Name, reconverge.Seconds(), window, before, len(w.Addresses()))},
		f.Succeeded == f.Requests)
}

// countWithdrawals follows w from now on and returns a function that says how many times every
// resource matching of left w's state (the last one removed; with none held, nothing counts).
func countWithdrawals(w *xdswatch.Watcher, of func(string, *workloadapi.Address) bool) func() int {
	var mu sync.Mutex
	held, n := map[string]bool{}, 0
	// Held until the state is read: an update that comes meanwhile waits for it.
	mu.Lock()
	state, stop := w.Subscribe(func(u xdswatch.Update) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case u.Address != nil && of(u.Name, u.Address):
			held[u.Name] = true
		case u.Address != nil || !held[u.Name]:
			delete(held, u.Name)
		default:
			delete(held, u.Name)
			if len(held) == 0 {
				n++
			}
		}
	})
	for name, a := range state {
		if of(name, a) {
			held[name] = true
		}
	}
	mu.Unlock()
	return func() int {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}
