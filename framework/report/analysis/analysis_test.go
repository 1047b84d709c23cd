package analysis

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestFitPerRemoteSyntheticSlope(t *testing.T) {
	// RSS grows 100 MB per remote cluster around a 150 MB baseline, with fixed ±noise so the
	// stderr is non-zero; live heap is unmeasured at one join to check points are skipped.
	noise := []float64{3e6, -4e6, 5e6, -2e6, 1e6, -6e6, 4e6, -1e6, 2e6, -3e6, 0}
	cp := &report.ControlPlane{ObservedIstiod: "cluster-1", Istiods: report.IstiodsAll,
		Baseline: report.Sample{RSSBytes: report.F(150e6 + noise[0]), LiveHeapBytes: report.F(40e6)}}
	for k := 1; k <= 10; k++ {
		j := report.Join{RemoteClusters: k, JoinCPUSeconds: report.F(3 + noise[k]/1e7), Sample: report.Sample{
			RSSBytes:      report.F(150e6 + 100e6*float64(k) + noise[k]),
			LiveHeapBytes: report.F(40e6 + 45e6*float64(k)),
		}}
		if k == 5 {
			j.LiveHeapBytes = nil
		}
		cp.Joins = append(cp.Joins, j)
	}
	if err := FitPerRemote(cp); err != nil {
		t.Fatal(err)
	}
	pr := cp.PerRemoteCluster
	if pr == nil || pr.RSSBytes == nil || pr.RSSBytes.StdErr == nil {
		t.Fatalf("RSS slope not fitted: %+v", pr)
	}
	if !near(pr.RSSBytes.Value, 100e6, 1e6) {
		t.Errorf("RSS slope = %.0f, want 100e6 ± 1e6", pr.RSSBytes.Value)
	}
	if se := *pr.RSSBytes.StdErr; se <= 0 || se > 1e6 {
		t.Errorf("RSS stderr = %.0f, want in (0, 1e6]", se)
	}
	if !near(pr.LiveHeapBytes.Value, 45e6, 1) || !near(*pr.LiveHeapBytes.StdErr, 0, 1e-3) {
		t.Errorf("live heap slope = %v ± %v, want exactly 45e6", pr.LiveHeapBytes.Value, *pr.LiveHeapBytes.StdErr)
	}
	// Cumulative join cost: ~3 CPU-seconds added per cluster.
	if pr.JoinCPUSeconds == nil || !near(pr.JoinCPUSeconds.Value, 3, 0.05) {
		t.Errorf("join CPU slope = %v, want ~3", pr.JoinCPUSeconds)
	}
	// Never measured: stays nil rather than a fitted zero.
	if pr.CPUCores != nil || pr.SteadyCPUCores != nil || pr.HeapInuseBytes != nil {
		t.Errorf("unmeasured metrics were fitted: %+v", pr)
	}
}

func TestFitPerRemoteUsesBaseline(t *testing.T) {
	// One join plus the baseline is two points: slope = difference, stderr unknown (absent, not 0).
	cp := &report.ControlPlane{Baseline: report.Sample{RSSBytes: report.F(100)}, Joins: []report.Join{{RemoteClusters: 1, Sample: report.Sample{RSSBytes: report.F(250)}}}}
	if err := FitPerRemote(cp); err != nil {
		t.Fatal(err)
	}
	if got := cp.PerRemoteCluster.RSSBytes.Value; got != 150 {
		t.Errorf("slope = %v, want 150", got)
	}
	if se := cp.PerRemoteCluster.RSSBytes.StdErr; se != nil {
		t.Errorf("stderr = %v from two points, want absent", *se)
	}
	b, err := json.Marshal(cp.PerRemoteCluster)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"stdErr"`) {
		t.Errorf("JSON carries a standard error of a two-point fit: %s", b)
	}
}

// A CPU slope carries the resolution of its points over the fitted range.
func TestFitPerRemoteCPUResolution(t *testing.T) {
	cp := &report.ControlPlane{Baseline: report.Sample{SteadyCPUCores: report.F(0.005), SteadyCPUCoresResolution: report.F(0.0025)}}
	for k := 1; k <= 4; k++ {
		cp.Joins = append(cp.Joins, report.Join{RemoteClusters: k, JoinCPUSeconds: report.F(0.1), JoinCPUSecondsResolution: report.F(0.01),
			Sample: report.Sample{SteadyCPUCores: report.F(0.005), SteadyCPUCoresResolution: report.F(0.0025 * float64(k))}})
	}
	if err := FitPerRemote(cp); err != nil {
		t.Fatal(err)
	}
	pr := cp.PerRemoteCluster
	if pr.SteadyCPUCores.Resolution == nil || !near(*pr.SteadyCPUCores.Resolution, 0.01/4, 1e-15) {
		t.Errorf("steady slope resolution = %v, want coarsest 0.01 over 4 clusters", pr.SteadyCPUCores.Resolution)
	}
	if pr.JoinCPUSeconds.Resolution == nil || !near(*pr.JoinCPUSeconds.Resolution, 0.01/4, 1e-15) {
		t.Errorf("join slope resolution = %v", pr.JoinCPUSeconds.Resolution)
	}
	if pr.RSSBytes != nil || pr.CPUCores != nil {
		t.Errorf("unmeasured metrics fitted: %+v", pr)
	}
}

func TestFitPerRemoteNothingToFit(t *testing.T) {
	cp := &report.ControlPlane{Baseline: report.Sample{RSSBytes: report.F(100)}}
	if err := FitPerRemote(cp); err == nil {
		t.Error("no joins: want an error")
	}
	if cp.PerRemoteCluster != nil {
		t.Error("PerRemoteCluster set despite the error")
	}
}

func TestFillDeltas(t *testing.T) {
	cp := &report.ControlPlane{
		Baseline: report.Sample{CPUCores: report.F(0.01), RSSBytes: report.F(100), HeapInuseBytes: report.F(50), LiveHeapBytes: report.F(20)},
		Joins: []report.Join{
			{RemoteClusters: 1, Sample: report.Sample{CPUCores: report.F(0.04), RSSBytes: report.F(220), HeapInuseBytes: report.F(110), LiveHeapBytes: nil}},
			{RemoteClusters: 2, Sample: report.Sample{CPUCores: report.F(0.03), RSSBytes: report.F(300), HeapInuseBytes: report.F(160), LiveHeapBytes: report.F(70)}},
		},
	}
	FillDeltas(cp)
	j1, j2 := cp.Joins[0], cp.Joins[1]
	if !near(*j1.DeltaCPUCores, 0.03, 1e-12) || *j1.DeltaRSSBytes != 120 || *j1.DeltaHeapInuseBytes != 60 {
		t.Errorf("first join deltas vs baseline: cpu %v rss %v heap %v", *j1.DeltaCPUCores, *j1.DeltaRSSBytes, *j1.DeltaHeapInuseBytes)
	}
	if !near(*j2.DeltaCPUCores, -0.01, 1e-12) || *j2.DeltaRSSBytes != 80 || *j2.DeltaHeapInuseBytes != 50 {
		t.Errorf("second join deltas vs first: cpu %v rss %v heap %v", *j2.DeltaCPUCores, *j2.DeltaRSSBytes, *j2.DeltaHeapInuseBytes)
	}
	// Unmeasured on either side: no delta.
	if j1.DeltaLiveHeapBytes != nil || j2.DeltaLiveHeapBytes != nil {
		t.Errorf("live heap deltas should be nil: %v %v", j1.DeltaLiveHeapBytes, j2.DeltaLiveHeapBytes)
	}
}

func TestComputeOverhead(t *testing.T) {
	runs := []report.LatencyRun{
		{Path: report.PathLocal, Connections: report.ConnNew, AvgMs: 0.8},
		{Path: report.PathCrossCluster, Connections: report.ConnNew, AvgMs: 3.0},
		{Path: report.PathCrossCluster, Connections: report.ConnNew, AvgMs: 3.2}, // averaged with the one above
		{Path: report.PathLocal, Connections: report.ConnReused, AvgMs: 0.2},
		{Path: report.PathCrossCluster, Connections: report.ConnReused, AvgMs: 0.3},
		{Path: report.PathDirect, Connections: report.ConnReused, AvgMs: 0.05}, // harness floor is not part of overhead
	}
	o := ComputeOverhead(runs)
	if o == nil || o.New == nil || o.Reused == nil {
		t.Fatalf("overhead = %+v", o)
	}
	if !near(o.New.DeltaMs, 2.3, 1e-9) || !near(o.New.Percent, 287.5, 1e-9) {
		t.Errorf("new = %+v, want 2.3 ms, 287.5%%", *o.New)
	}
	if !near(o.Reused.DeltaMs, 0.1, 1e-9) || !near(o.Reused.Percent, 50, 1e-9) {
		t.Errorf("reused = %+v, want 0.1 ms, 50%%", *o.Reused)
	}

	o = ComputeOverhead(runs[:3])
	if o == nil || o.New == nil || o.Reused != nil {
		t.Errorf("new-only runs: %+v, want reused nil", o)
	}
	if o := ComputeOverhead(runs[1:3]); o != nil {
		t.Errorf("no local runs: want nil, got %+v", o)
	}
}

func TestFitJoinGrowth(t *testing.T) {
	cp := &report.ControlPlane{}
	// The k-th join (k already joined) costs 2 + 0.5k CPU-s; convergence is flat at 1.5 s.
	for k := 0; k < 4; k++ {
		cp.Joins = append(cp.Joins, report.Join{RemoteClusters: k + 1, JoinCPUSeconds: report.F(2 + 0.5*float64(k)), ConvergenceSeconds: report.F(1.5)})
	}
	FitJoinGrowth(cp)
	g := cp.JoinGrowth
	require.NotNil(t, g)
	require.NotNil(t, g.JoinCPUSeconds)
	assert.InDelta(t, 2, g.JoinCPUSeconds.Intercept, 1e-9, "a is the first join's cost")
	assert.InDelta(t, 0.5, g.JoinCPUSeconds.Slope, 1e-9)
	require.NotNil(t, g.JoinCPUSeconds.SlopeStdErr)
	assert.Equal(t, 4, g.JoinCPUSeconds.N)
	assert.InDelta(t, 0, g.ConvergenceSeconds.Slope, 1e-9)
	assert.Nil(t, g.SyncSeconds, "never measured: absent")

	two := &report.ControlPlane{Joins: cp.Joins[:2]}
	FitJoinGrowth(two)
	assert.Nil(t, two.JoinGrowth.JoinCPUSeconds.SlopeStdErr, "two joins leave no residual: no standard error")
	one := &report.ControlPlane{Joins: cp.Joins[:1]}
	FitJoinGrowth(one)
	assert.Nil(t, one.JoinGrowth, "one join fits no line")
}

func TestMemoryReturned(t *testing.T) {
	cp := &report.ControlPlane{
		Baseline: report.Sample{RSSBytes: report.F(100), LiveHeapBytes: report.F(40)},
		Joins: []report.Join{
			{RemoteClusters: 1, Sample: report.Sample{RSSBytes: report.F(200), LiveHeapBytes: report.F(90)}},
			{RemoteClusters: 2, Sample: report.Sample{RSSBytes: report.F(300), LiveHeapBytes: report.F(140)}},
		},
		Leaves: []report.Leave{{RemoteClusters: 1, RSSBytes: report.F(260), LiveHeapBytes: report.F(95)}},
	}
	ret := MemoryReturned(cp)
	require.NotNil(t, ret)
	assert.Equal(t, 2, ret.PeakRemoteClusters)
	assert.Equal(t, 1, ret.RemoteClusters)
	assert.Equal(t, 45.0, *ret.LiveHeapBytes, "peak 140 minus 95 after the leave")
	assert.Equal(t, 40.0, *ret.RSSBytes)
	assert.Equal(t, 5.0, *ret.LeftoverLiveHeap, "95 after the leave against 90 at one remote on the way up")
	assert.Equal(t, 60.0, *ret.LeftoverRSSBytes)

	// Everyone left: the leftover is against the baseline.
	cp.Leaves = append(cp.Leaves, report.Leave{RemoteClusters: 0, RSSBytes: report.F(150), LiveHeapBytes: nil})
	ret = MemoryReturned(cp)
	assert.Equal(t, 50.0, *ret.LeftoverRSSBytes)
	assert.Nil(t, ret.LeftoverLiveHeap, "unmeasured after the leave: no leftover")
	assert.Nil(t, ret.LiveHeapBytes)

	assert.Nil(t, MemoryReturned(&report.ControlPlane{Joins: cp.Joins}), "no leaves")
	assert.Nil(t, MemoryReturned(nil))
}

// Heap and goroutine profiles cost what taking them took; a CPU profile runs in the background
// and costs only the wait for its end.
func TestProfilesCost(t *testing.T) {
	ps := []report.Profile{
		{Kind: "heap", Seconds: 0.25}, {Kind: "goroutine", Seconds: 0.5},
		{Kind: "cpu", Seconds: 10, WaitedSeconds: report.F(2)}, {Kind: "cpu", Seconds: 10},
	}
	assert.Equal(t, 2.75, ProfilesCost(ps))
	assert.Zero(t, ProfilesCost(nil))
}

// A tail of stalls moves the average, not the median: the run of the 10-cluster main command where
// cross-cluster new connections averaged 13.4 ms over a 3.3 ms median.
func TestTailDominatedAndMedianOverhead(t *testing.T) {
	runs := []report.LatencyRun{
		{Path: report.PathLocal, Connections: report.ConnNew, AvgMs: 0.92, P50Ms: 0.82},
		{Path: report.PathCrossCluster, Connections: report.ConnNew, AvgMs: 13.39, P50Ms: 3.30},
		{Path: report.PathLocal, Connections: report.ConnReused, AvgMs: 0.37, P50Ms: 0.24},
		{Path: report.PathCrossCluster, Connections: report.ConnReused, AvgMs: 0.36, P50Ms: 0.32},
	}
	tails := TailDominated(runs)
	if len(tails) != 1 || tails[0].Path != report.PathCrossCluster || tails[0].Connections != report.ConnNew {
		t.Fatalf("tail-dominated runs = %+v, want cross-cluster new only", tails)
	}
	o := ComputeMedianOverhead(runs)
	if o == nil || !near(o.New.DeltaMs, 2.48, 1e-9) || !near(o.Reused.DeltaMs, 0.08, 1e-9) {
		t.Errorf("median overhead = %+v %+v, want new +2.48 ms, reused +0.08 ms", o.New, o.Reused)
	}
}

// sequence is a join sequence whose live heap grows by perRemote MB per cluster from base MB.
func sequence(base, perRemote float64, joins int) report.JoinSequence {
	s := report.JoinSequence{Baseline: report.Sample{LiveHeapBytes: report.F(base * 1e6), RSSBytes: report.F(140e6)}}
	for k := 1; k <= joins; k++ {
		s.Joins = append(s.Joins, report.Join{RemoteClusters: k, JoinCPUSeconds: report.F(0.1), Sample: report.Sample{
			LiveHeapBytes: report.F((base + perRemote*float64(k)) * 1e6), RSSBytes: report.F(140e6 + 10e6*float64(k))}})
	}
	return s
}

func TestCombineSequencesTakesTheMeanAndItsStandardError(t *testing.T) {
	cp := &report.ControlPlane{Sequences: []report.JoinSequence{sequence(20.5, 3.9, 2), sequence(20.6, 4.0, 2), sequence(20.7, 4.1, 2)}}
	for k := range cp.Sequences {
		require.NoError(t, FitSequence(&cp.Sequences[k]))
		assert.Equal(t, report.StdErrOfFit, cp.Sequences[k].PerRemoteCluster.StdErrOf)
		require.NotNil(t, cp.Sequences[k].Joins[0].DeltaLiveHeapBytes, "FitSequence fills the deltas")
	}
	require.NoError(t, CombineSequences(cp))
	pr := cp.PerRemoteCluster
	assert.Equal(t, report.StdErrOfSequences, pr.StdErrOf)
	// 3.9, 4.0, 4.1 MB: mean 4.0, sd 0.1, standard error 0.1/sqrt(3).
	assert.InDelta(t, 4.0e6, pr.LiveHeapBytes.Value, 1)
	assert.InDelta(t, 0.1e6/math.Sqrt(3), *pr.LiveHeapBytes.StdErr, 1)
	// Every sequence's RSS grows by exactly 10 MB: no spread, a zero error (not absent).
	assert.InDelta(t, 10e6, pr.RSSBytes.Value, 1)
	assert.InDelta(t, 0, *pr.RSSBytes.StdErr, 1e-6)
	assert.InDelta(t, 20.6e6, *cp.BaselineMean.LiveHeapBytes, 1)
	assert.InDelta(t, 0.1e6/math.Sqrt(3), *cp.BaselineStdErr.LiveHeapBytes, 1)
	assert.Nil(t, pr.HeapInuseBytes, "never measured: absent, not a mean of zeros")
}

func TestCombineSequencesNeedsTwoFittedSequences(t *testing.T) {
	cp := &report.ControlPlane{Sequences: []report.JoinSequence{sequence(20, 4, 2)}}
	require.NoError(t, FitSequence(&cp.Sequences[0]))
	assert.ErrorContains(t, CombineSequences(cp), "at least 2")
	cp.Sequences = append(cp.Sequences, sequence(20, 4, 2))
	assert.ErrorContains(t, CombineSequences(cp), "sequence 2 has no per-remote fit")
	assert.Nil(t, cp.PerRemoteCluster, "left unchanged on error")
}
