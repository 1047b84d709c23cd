package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
)

// TestControlPlaneJoin reproduces the control-plane half of Istio's published ambient multicluster
// numbers: clusters join the mesh one at a time while one istiod is measured. Per join: write the
// remote secrets, wait until istiod reports the cluster synced and a ztunnel-like client holds the
// cluster's network, let istiod settle, then sample CPU and memory.
func TestControlPlaneJoin(t *testing.T) {
	ctx := context.Background()
	obs, istiod := observedIstiod(t)
	leaveAll(t, istiod)
	require.NoError(t, ambient.Join(ctx, obs.Name), "a mesh of one")
	w := startWatcher(t, obs, istiod)
	clients := xdsClients()
	for n := 1; n < clients; n++ {
		// Extra clients only add istiod's push work; the first one is what the joins wait for.
		startWatcher(t, obs, istiod)
	}
	settle, steady := windows()
	samples := mc.Flags.JoinSamples

	cp := &report.ControlPlane{ObservedIstiod: obs.Name, Istiods: mc.Flags.Istiods, XDSClients: clients}
	src := istiod.Sampler().CPUSource()
	cp.CPUSource, cp.CPUResolutionSeconds = src.Name(), report.F(src.Resolution())
	cp.SettleSeconds, cp.SteadyWindowSeconds = report.F(settle.Seconds()), report.F(steady.Seconds())
	mc.Logf("join: baseline of istiod %s (settle %s, steady window %s, CPU from %s)", obs.Name, settle, steady, src.Name())
	start := readCPU(t, istiod)
	cp.Baseline = sampleAfter(t, istiod, start, time.Now().Add(settle), steady, samples).Sample
	mc.Profile(istiod, "baseline")

	var others []string
	for _, c := range mc.Clusters {
		if c.Name != obs.Name {
			others = append(others, c.Name)
		}
	}
	for k, name := range others {
		c := mc.Cluster(name)
		cpuProfile := func() {}
		if k == len(others)-1 { // the last join's burst, profiled for 10 s from just before its secret
			cpuProfile = mc.ProfileCPU(istiod, "join-"+name)
		}
		before := readCPU(t, istiod)
		hostBefore, hostErr := measure.ReadHostCPU()
		conv, joinedAt := joinAndWait(t, istiod, w, c)
		mc.Logf("join %d/%d: %s converged in %.2fs (remote synced %.2fs, xDS %.2fs)", k+1, len(others), name,
			conv.Total.Seconds(), conv.Sync.Seconds(), conv.XDS.Seconds())
		sample := sampleAfter(t, istiod, before, joinedAt.Add(conv.Total+settle), steady, samples)
		var hostBusy *float64
		if hostAfter, err := measure.ReadHostCPU(); err == nil && hostErr == nil {
			hostBusy = report.F(hostAfter.BusySince(hostBefore))
		}
		j := report.Join{
			Cluster:            name,
			RemoteClusters:     k + 1,
			SyncSeconds:        report.F(conv.Sync.Seconds()),
			XDSSeconds:         report.F(conv.XDS.Seconds()),
			ConvergenceSeconds: report.F(conv.Total.Seconds()),
			JoinCPUSeconds:     sample.JoinCPUSeconds,
			Sample:             sample.Sample,

			JoinCPUSecondsResolution: sample.JoinCPUSecondsResolution,
			HostCPUBusy:              hostBusy,
		}
		cp.Joins = append(cp.Joins, j)
		if k == len(others)-1 {
			cpuProfile()
			mc.Profile(istiod, "after-join-"+name)
		}
		mc.Logf("join %d/%d: %s: istiod rss %.0f MB, heap in use %.0f MB, live heap %.0f MB, join CPU %.2fs, steady %.4f cores",
			k+1, len(others), name, *j.RSSBytes/1e6, *j.HeapInuseBytes/1e6, *j.LiveHeapBytes/1e6, *j.JoinCPUSeconds, *j.SteadyCPUCores)
	}
	cp.FillDeltas()
	mc.Report.ControlPlane = mergeLeaves(cp, mc.Report.ControlPlane)

	final := scrape(t, istiod)
	assert.Equal(t, float64(len(others)), final.ManagedClusters["remote"], "istiod manages every joined cluster")
	assert.Len(t, final.RemoteClusters(), len(others))
	if len(others) == 0 {
		return
	}
	require.NoError(t, cp.FitPerRemote())
	cp.FitJoinGrowth()
	warnSaturatedJoins(cp)
	if g := cp.JoinGrowth; g != nil && g.JoinCPUSeconds != nil && g.ConvergenceSeconds != nil {
		mc.Logf("join: the k-th join costs %.2f + %.3f·k CPU-s and converges in %.2f + %.3f·k s (k = clusters already joined; %d joins)",
			g.JoinCPUSeconds.Intercept, g.JoinCPUSeconds.Slope, g.ConvergenceSeconds.Intercept, g.ConvergenceSeconds.Slope, g.JoinCPUSeconds.N)
	}
	pr := cp.PerRemoteCluster
	require.NotNil(t, pr.LiveHeapBytes)
	mc.Logf("join: per remote cluster: rss %.1f±%.1f MB, live heap %.1f±%.1f MB, join CPU %.2f CPU-s, steady %.4f cores (published: 180 MB, 0.01 cores)",
		*pr.RSSBytes/1e6, deref(pr.RSSBytesStdErr)/1e6, *pr.LiveHeapBytes/1e6, deref(pr.LiveHeapBytesStdErr)/1e6, deref(pr.JoinCPUSeconds), deref(pr.SteadyCPUCores))
	// Sane bounds, not targets: a remote cluster must cost istiod some memory, and not gigabytes.
	assert.Greater(t, *pr.LiveHeapBytes, 0.0, "each remote cluster adds live heap")
	assert.Less(t, *pr.LiveHeapBytes, 2e9, "per-remote live heap")
}

// stepSample is what one step (baseline or join) measured.
type stepSample struct {
	report.Sample
	JoinCPUSeconds, JoinCPUSecondsResolution *float64
}

// sampleAfter waits until settleAt, reading CPU over the steady window that ends there, then takes
// the memory samples. CPU-seconds and the average rate count from `from` (just before the step).
func sampleAfter(t *testing.T, i cluster.Istiod, from measure.CPUReading, settleAt time.Time, steady time.Duration, samples int) stepSample {
	t.Helper()
	sleepUntil(settleAt.Add(-steady))
	steadyStart := readCPU(t, i)
	sleepUntil(settleAt)
	end := readCPU(t, i)
	settled, err := i.Sampler().Settled(context.Background(), samples, time.Second)
	require.NoError(t, err, "sampling istiod %s", i.Cluster())
	blended, err := measure.SpanBetween(from, end)
	require.NoError(t, err, "istiod %s CPU", i.Cluster())
	steadySpan, err := measure.SpanBetween(steadyStart, end)
	require.NoError(t, err, "istiod %s steady CPU", i.Cluster())
	s := stepSample{Sample: report.MemorySample(settled)}
	s.SetCPU(blended, steadySpan)
	s.JoinCPUSeconds, s.JoinCPUSecondsResolution = report.F(blended.CPUSeconds), report.F(blended.Resolution)
	return s
}

// mergeLeaves keeps leave results a previous test recorded.
func mergeLeaves(cp, previous *report.ControlPlane) *report.ControlPlane {
	if previous != nil {
		cp.Leaves = previous.Leaves
	}
	return cp
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// TestControlPlaneLeave removes clusters one at a time (newest first) and checks that istiod lets
// each one go: the remote cluster leaves istiod's managed set and the ztunnel-like client loses
// its network; memory after each leave is recorded.
func TestControlPlaneLeave(t *testing.T) {
	ctx := context.Background()
	obs, istiod := observedIstiod(t)
	w := startWatcher(t, obs, istiod)
	// Join whatever is not joined yet (unmeasured), so the test also runs on its own.
	if len(ambient.Joined()) == 0 {
		require.NoError(t, ambient.Join(ctx, obs.Name))
	}
	for _, c := range mc.Clusters {
		if !slices.Contains(ambient.Joined(), c.Name) {
			joinAndWait(t, istiod, w, c)
		}
	}
	cp := mc.Report.ControlPlane
	if cp == nil {
		cp = &report.ControlPlane{ObservedIstiod: obs.Name, Istiods: mc.Flags.Istiods}
		mc.Report.ControlPlane = cp
	}
	cp.Leaves = nil
	joined := ambient.Joined()
	for k := len(joined) - 1; k >= 0; k-- {
		name := joined[k]
		if name == obs.Name {
			continue
		}
		c := mc.Cluster(name)
		start := time.Now()
		require.NoError(t, ambient.Leave(ctx, name))
		require.NoError(t, waitLeft(ctx, istiod, w, c, mc.Flags.JoinTimeout))
		elapsed := time.Since(start)
		settled, err := istiod.Sampler().Settled(ctx, mc.Flags.JoinSamples, time.Second)
		require.NoError(t, err)
		after := scrape(t, istiod)
		remaining := len(ambient.Joined()) - 1
		assert.Equal(t, float64(remaining), after.ManagedClusters["remote"], "managed remote clusters after %s left", name)
		assert.NotContains(t, after.RemoteClusters(), name)
		cp.Leaves = append(cp.Leaves, report.Leave{
			Cluster: name, RemoteClusters: remaining, ManagedRemoteClusters: int(after.ManagedClusters["remote"]),
			Seconds: report.F(elapsed.Seconds()), RSSBytes: report.F(settled.RSSBytes), LiveHeapBytes: report.F(settled.LiveHeapBytes),
		})
		mc.Profile(istiod, "after-leave-"+name)
		mc.Logf("leave: %s gone in %.2fs; istiod live heap %.0f MB, rss %.0f MB, %d remote clusters left",
			name, elapsed.Seconds(), settled.LiveHeapBytes/1e6, settled.RSSBytes/1e6, remaining)
	}
}

// warnSaturatedJoins says in the report which joins ran on a saturated host: their convergence
// and join CPU include waiting for a CPU, so the growth fit through them is not istiod's alone.
func warnSaturatedJoins(cp *report.ControlPlane) {
	var ks []string
	for _, j := range cp.Joins {
		if j.HostCPUBusy != nil && *j.HostCPUBusy > saturated {
			ks = append(ks, strconv.Itoa(j.RemoteClusters))
		}
	}
	if len(ks) > 0 {
		mc.Report.Warnings = append(mc.Report.Warnings, fmt.Sprintf(
			"host CPU was above %.0f%% busy during %d of %d joins (remote clusters %s): their convergence and join CPU include waiting for a CPU",
			100*saturated, len(ks), len(cp.Joins), strings.Join(ks, ", ")))
	}
}
