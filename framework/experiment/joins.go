package experiment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/envoyxds"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// ControlPlane is the report's control-plane section, which the join and the leave suites share
// (each fills its own part of it, in whichever order they run).
func (r *Run) ControlPlane() *report.ControlPlane {
	if r.Report.ControlPlane == nil {
		r.Report.ControlPlane = &report.ControlPlane{ObservedIstiod: r.ObservedCluster().Name, Istiods: r.Flags.Istiods}
	}
	return r.Report.ControlPlane
}

// MeasureJoins is the control-plane half of Istio's published ambient multicluster numbers:
// clusters join the mesh one at a time while one istiod, fresh, is measured. Per join: write the
// remote secrets, wait until istiod reports the cluster synced and a ztunnel-like client holds the
// cluster's network, let istiod settle, then sample CPU and memory. With -join.repeats of 2 or
// more it measures that many sequences, each on an istiod started fresh for it, and the per-remote
// figures are their mean, with errors that include the spread between istiods. It fills and
// returns the report's control-plane section; the per-remote figures are nil when nothing joined.
func (r *Run) MeasureJoins(t *testing.T, ctx context.Context) *report.ControlPlane {
	t.Helper()
	cp := r.ControlPlane()
	cp.Joins, cp.PerRemoteCluster, cp.JoinGrowth = nil, nil, nil
	cp.Sequences, cp.BaselineMean, cp.BaselineStdErr = nil, nil, nil
	repeats := max(1, r.Opts.Join.Repeats)
	var seqs []report.JoinSequence
	for k := range repeats {
		measure := func(t *testing.T) { seqs = append(seqs, r.joinSequence(t, ctx, cp, k, repeats)) }
		if repeats == 1 {
			measure(t)
		} else if !t.Run(fmt.Sprintf("sequence-%d", k+1), measure) {
			t.FailNow()
		}
	}
	first := seqs[0]
	cp.MeasuredIstiod, cp.Baseline, cp.Joins, cp.PerRemoteCluster = first.MeasuredIstiod, first.Baseline, first.Joins, first.PerRemoteCluster
	cp.Clients = r.ServedClients(ctx)
	for _, c := range cp.Clients {
		r.Logf("join: istiod %s serves %d ztunnel, %d east-west gateway, %d waypoint and %d other xDS clients", c.Istiod, c.Ztunnel, c.EastWest, c.Waypoint, c.Other)
	}
	for _, kind := range []envoyxds.Kind{envoyxds.EastWest, envoyxds.Waypoint} {
		for _, p := range r.Proxies.Of(cp.ObservedIstiod, kind) {
			r.Logf("join: %s %s/%s holds %s of istiod %s's", kind, p.Pod().Namespace, p.Pod().Name, heldText(p.Held()), cp.ObservedIstiod)
		}
	}
	if len(cp.Joins) == 0 {
		return cp
	}
	if repeats > 1 {
		cp.Sequences = seqs
		require.NoError(t, analysis.CombineSequences(cp))
	}
	analysis.FitJoinGrowth(cp)
	r.warnSaturatedJoins(cp)
	if g := cp.JoinGrowth; g != nil && g.JoinCPUSeconds != nil && g.ConvergenceSeconds != nil {
		r.Logf("join: the k-th join costs %.2f + %.3f·k CPU-s and converges in %.2f + %.3f·k s (k = clusters already joined; %d joins)",
			g.JoinCPUSeconds.Intercept, g.JoinCPUSeconds.Slope, g.ConvergenceSeconds.Intercept, g.ConvergenceSeconds.Slope, g.JoinCPUSeconds.N)
	}
	pr := cp.PerRemoteCluster
	require.NotNil(t, pr.LiveHeapBytes, "the per-remote fit has a live heap")
	over := "the fit's standard errors"
	if repeats > 1 {
		over = fmt.Sprintf("mean of %d sequences ± its standard error", repeats)
	}
	ws := "not measured"
	if pr.WorkingSetBytes != nil {
		ws = fmt.Sprintf("%.1f±%.1f MB", pr.WorkingSetBytes.Value/1e6, deref(pr.WorkingSetBytes.StdErrOf())/1e6)
	}
	r.Logf("join: per remote cluster (%s): rss %.1f±%.1f MB, working set %s, live heap %.2f±%.2f MB, join CPU %.2f CPU-s, steady %.4f cores (published: 180 MB, 0.01 cores)",
		over, pr.RSSBytes.Value/1e6, deref(pr.RSSBytes.StdErrOf())/1e6, ws, pr.LiveHeapBytes.Value/1e6, deref(pr.LiveHeapBytes.StdErrOf())/1e6, deref(pr.JoinCPUSeconds.ValueOf()), deref(pr.SteadyCPUCores.ValueOf()))
	return cp
}

// joinSequence measures sequence seqIndex of repeats: a fresh istiod's baseline, then every other
// cluster joining one at a time, fitted (deltas and per-remote slopes). The first sequence sets
// the section's settle rule and CPU source and takes the profiles.
func (r *Run) joinSequence(t *testing.T, ctx context.Context, cp *report.ControlPlane, seqIndex, repeats int) report.JoinSequence {
	t.Helper()
	first := seqIndex == 0
	tag := "join"
	if repeats > 1 {
		tag = fmt.Sprintf("join [sequence %d/%d]", seqIndex+1, repeats)
	}
	obs := r.ObservedCluster()
	reconnects := r.Proxies.Reconnects(obs.Name)
	istiod, measured := r.IstiodFor(t, ctx, obs.Name) // a mesh of one; the joins below are the measurement
	if measured.Restarted {
		r.WaitProxiesReconnected(t, ctx, obs.Name, reconnects)
	}
	w := r.StartWatcher(t, ctx, obs, istiod)
	ztunnels := []*xdswatch.Watcher{w}
	clients := join.XDSClients(r.Opts.Join.XDSClients, r.Scale.Pods)
	for n := 1; n < clients; n++ {
		// Extra clients only add istiod's push work; the first one is what the joins wait for.
		ztunnels = append(ztunnels, r.StartLoadClient(t, ctx, obs, istiod))
	}
	s := join.NewSettler(istiod, r.Experiment())
	src := istiod.Sampler().CPUSource()
	if first {
		cp.XDSClients = clients
		cp.CPUSource, cp.CPUResolutionSeconds = src.Name(), report.F(src.Resolution())
		cp.SteadyWindowSeconds = report.F(s.SteadyWindow().Seconds())
		if s.Fixed {
			cp.SettleSeconds = report.F(s.Settle.Seconds())
		}
	}
	r.Logf("%s: baseline of istiod %s (steady window %s, CPU from %s)", tag, obs.Name, s.SteadyWindow(), src.Name())
	base, err := s.Baseline(ctx)
	require.NoError(t, err)
	seq := report.JoinSequence{MeasuredIstiod: measured, Baseline: report.MemorySample(base.Settled)}
	seq.Baseline.SetCPU(base.Blended, base.Steady)
	r.Logf("%s: baseline: istiod rss %.0f MB, heap in use %.1f MB, live heap %.2f MB", tag, base.RSSBytes/1e6, base.HeapInuseBytes/1e6, base.LiveHeapBytes/1e6)
	if first {
		cp.SettleRule = s.Rule()
		r.Logf("join: settle rule: %s", cp.SettleRule)
		r.Profile(istiod, "baseline")
	}

	others := r.EveryCluster()[1:]
	for k, name := range others {
		c := r.Cluster(name)
		last := first && k == len(others)-1
		var cpuProfile func()
		if last { // the last join's burst, profiled for 5 s from just before its secret
			cpuProfile = r.ProfileCPU(istiod, "join-"+name)
		}
		kinds, xdsBefore := r.clientsOf(obs.Name, ztunnels)
		before := r.ReadCPU(t, ctx, istiod)
		hostBefore, hostErr := measure.ReadHostCPU()
		conv, joinedAt := r.JoinAndWait(t, ctx, istiod, w, c)
		r.Logf("%s %d/%d: %s converged in %.2fs (remote synced %.2fs, xDS %.2fs, %s)", tag, k+1, len(others), name,
			conv.Total.Seconds(), conv.Sync.Seconds(), conv.XDS.Seconds(), join.Criterion(obs, c))
		// Memory only once the CPU profile has ended: while it runs, istiod's profiler holds about
		// 1.2 MB of buffers (runtime's profBuf and pprof's builder), which the live heap would count.
		st, err := s.After(ctx, before, joinedAt.Add(conv.Total), cpuProfile)
		require.NoError(t, err)
		_, xdsAfter := r.clientsOf(obs.Name, ztunnels)
		var hostBusy *float64
		if hostAfter, err := measure.ReadHostCPU(); err == nil && hostErr == nil {
			hostBusy = report.F(hostAfter.BusySince(hostBefore))
		}
		j := report.Join{
			Cluster:            name,
			RemoteClusters:     k + 1,
			Criterion:          join.Criterion(obs, c),
			SyncSeconds:        report.F(conv.Sync.Seconds()),
			XDSSeconds:         report.F(conv.XDS.Seconds()),
			ConvergenceSeconds: report.F(conv.Total.Seconds()),
			SettleSeconds:      report.F(st.SettledAfter.Seconds()),
			SettleCapped:       st.Capped,
			JoinCPUSeconds:     report.F(st.Blended.CPUSeconds),
			Sample:             report.MemorySample(st.Settled),

			JoinCPUSecondsResolution: report.F(st.Blended.Resolution),
			HostCPUBusy:              hostBusy,
			XDS:                      xdsSince(kinds, xdsBefore, xdsAfter),
		}
		if !s.Fixed {
			j.QuietLimitCores = report.F(st.QuietLimit)
		}
		j.SetCPU(st.Blended, st.Steady)
		seq.Joins = append(seq.Joins, j)
		if last {
			r.Profile(istiod, "after-join-"+name)
		}
		r.Logf("%s %d/%d: %s: settled after %.1fs%s; istiod rss %.0f MB, heap in use %.1f MB, live heap %.2f MB, join CPU %.3fs, steady %.4f cores",
			tag, k+1, len(others), name, st.SettledAfter.Seconds(), cappedNote(st.Capped), *j.RSSBytes/1e6, *j.HeapInuseBytes/1e6, *j.LiveHeapBytes/1e6,
			*j.JoinCPUSeconds, *j.SteadyCPUCores)
		r.Logf("%s %d/%d: %s: xDS pushed during the join: %s", tag, k+1, len(others), name, xdsText(j.XDS))
		if b := st.Reread; b != nil {
			r.Logf("%s %d/%d: istiod's idle band read again after the capped settle: limit %.4f -> %.4f cores (idle mean %.4f)", tag, k+1, len(others), st.QuietLimit, b.Limit, b.Mean)
		}
	}

	final := r.Scrape(t, ctx, istiod)
	assert.Equal(t, float64(len(others)), final.ManagedClusters["remote"], "istiod manages every joined cluster")
	assert.Len(t, final.RemoteClusters(), len(others))
	if len(others) > 0 {
		require.NoError(t, analysis.FitSequence(&seq))
		if pr := seq.PerRemoteCluster; repeats > 1 && pr.LiveHeapBytes != nil {
			r.Logf("%s: per remote cluster: live heap %.2f±%.2f MB (this sequence's fit)", tag, pr.LiveHeapBytes.Value/1e6, deref(pr.LiveHeapBytes.StdErrOf())/1e6)
		}
	}
	return seq
}

// heldText is how many resources of each type a proxy holds, for the log.
func heldText(h map[string]int) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(h)) {
		parts = append(parts, fmt.Sprintf("%s %d", t, h[t]))
	}
	return strings.Join(parts, ", ")
}

// xdsText is what a join pushed each kind of the framework's clients, for the log.
func xdsText(x map[string]report.XDSReceived) string {
	var parts []string
	for _, kind := range []string{report.ClientZtunnel, report.ClientEastWest, report.ClientWaypoint} {
		if r, ok := x[kind]; ok {
			parts = append(parts, fmt.Sprintf("%s (%d) %d pushes, %.1f KB", kind, r.Clients, r.Pushes, float64(r.Bytes)/1e3))
		}
	}
	return strings.Join(parts, "; ")
}

func cappedNote(capped bool) string {
	if capped {
		return " (at its cap: istiod's CPU had not returned to its idle band)"
	}
	return ""
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// warnSaturatedJoins says in the report which joins ran on a saturated host: their convergence
// and join CPU include waiting for a CPU, so the growth fit through them is not istiod's alone.
func (r *Run) warnSaturatedJoins(cp *report.ControlPlane) {
	joins := cp.Joins
	if len(cp.Sequences) > 0 {
		joins = nil
		for _, s := range cp.Sequences {
			joins = append(joins, s.Joins...)
		}
	}
	var ks []string
	for _, j := range joins {
		if j.HostCPUBusy != nil && *j.HostCPUBusy > measure.HostSaturated {
			ks = append(ks, strconv.Itoa(j.RemoteClusters))
		}
	}
	if len(ks) > 0 {
		r.Report.Warnings = append(r.Report.Warnings, fmt.Sprintf(
			"host CPU was above %.0f%% busy during %d of %d joins (remote clusters %s): their convergence and join CPU include waiting for a CPU",
			100*measure.HostSaturated, len(ks), len(joins), strings.Join(ks, ", ")))
	}
}
