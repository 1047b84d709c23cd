package analysis

import (
	"fmt"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/stats"
)

// FitSequence fills one join sequence's deltas and per-remote fit, as FillDeltas and
// FitPerRemote do for a report's own baseline and joins.
func FitSequence(seq *report.JoinSequence) error {
	cp := &report.ControlPlane{Baseline: seq.Baseline, Joins: seq.Joins}
	FillDeltas(cp)
	if err := FitPerRemote(cp); err != nil {
		return err
	}
	seq.Joins, seq.PerRemoteCluster = cp.Joins, cp.PerRemoteCluster
	return nil
}

// CombineSequences sets cp.PerRemoteCluster to the mean of the sequences' fitted slopes, with the
// standard error of that mean, and cp.BaselineMean / BaselineStdErr likewise: figures whose
// errors include the spread from one fresh istiod to the next, which one sequence's fit cannot
// see. A figure some sequence did not measure stays nil; a resolution is the coarsest among the
// sequences. It needs two sequences, each fitted (FitSequence).
func CombineSequences(cp *report.ControlPlane) error {
	seqs := cp.Sequences
	if len(seqs) < 2 {
		return fmt.Errorf("report: combining join sequences needs at least 2, got %d", len(seqs))
	}
	for k, s := range seqs {
		if s.PerRemoteCluster == nil {
			return fmt.Errorf("report: join sequence %d has no per-remote fit", k+1)
		}
	}
	// combine sets mean and stdErr from get over every sequence; nil when one lacks the value.
	combine := func(get func(k int) *float64, mean, stdErr **float64) {
		vs := make([]float64, 0, len(seqs))
		for k := range seqs {
			v := get(k)
			if v == nil {
				return
			}
			vs = append(vs, *v)
		}
		m, se, ok := stats.MeanStdErr(vs)
		if !ok {
			return
		}
		*mean, *stdErr = report.F(m), report.F(se)
	}
	coarsest := func(get func(k int) *float64) *float64 {
		var c *float64
		for k := range seqs {
			if r := get(k); r != nil && (c == nil || *r > *c) {
				c = report.F(*r)
			}
		}
		return c
	}
	pr := &report.PerRemote{StdErrOf: report.StdErrOfSequences}
	for _, m := range report.PerRemoteMetrics {
		of := func(k int) *report.Estimate { return *m.Of(seqs[k].PerRemoteCluster) }
		var mean, stdErr *float64
		combine(func(k int) *float64 { return of(k).ValueOf() }, &mean, &stdErr)
		if mean == nil {
			continue
		}
		*m.Of(pr) = &report.Estimate{Value: *mean, StdErr: stdErr, Resolution: coarsest(func(k int) *float64 {
			return of(k).Resolution
		})}
	}

	var mean, se report.Sample
	base := func(k int) report.Sample { return seqs[k].Baseline }
	combine(func(k int) *float64 { return base(k).CPUCores }, &mean.CPUCores, &se.CPUCores)
	combine(func(k int) *float64 { return base(k).SteadyCPUCores }, &mean.SteadyCPUCores, &se.SteadyCPUCores)
	combine(func(k int) *float64 { return base(k).RSSBytes }, &mean.RSSBytes, &se.RSSBytes)
	combine(func(k int) *float64 { return base(k).HeapInuseBytes }, &mean.HeapInuseBytes, &se.HeapInuseBytes)
	combine(func(k int) *float64 { return base(k).LiveHeapBytes }, &mean.LiveHeapBytes, &se.LiveHeapBytes)
	combine(func(k int) *float64 { return base(k).WorkingSetBytes }, &mean.WorkingSetBytes, &se.WorkingSetBytes)
	mean.CPUCoresResolution = coarsest(func(k int) *float64 { return base(k).CPUCoresResolution })
	mean.SteadyCPUCoresResolution = coarsest(func(k int) *float64 { return base(k).SteadyCPUCoresResolution })

	cp.PerRemoteCluster, cp.BaselineMean, cp.BaselineStdErr = pr, &mean, &se
	return nil
}
