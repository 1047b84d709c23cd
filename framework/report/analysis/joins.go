package analysis

import "github.com/ambientmc/ambientmc/framework/report"

// FillDeltas sets each join's deltas against the step before it (the first join against the
// baseline), in the order the joins happened. A delta is nil when either side was not measured.
func FillDeltas(cp *report.ControlPlane) {
	prev := cp.Baseline
	for i := range cp.Joins {
		j := &cp.Joins[i]
		j.DeltaCPUCores = sub(j.CPUCores, prev.CPUCores)
		j.DeltaRSSBytes = sub(j.RSSBytes, prev.RSSBytes)
		j.DeltaHeapInuseBytes = sub(j.HeapInuseBytes, prev.HeapInuseBytes)
		j.DeltaLiveHeapBytes = sub(j.LiveHeapBytes, prev.LiveHeapBytes)
		prev = j.Sample
	}
}

// Returned is how much istiod memory the leaves gave back: from the peak (the last join) to after
// the last leave. Leftover compares the last leave with the sample taken on the way up at the same
// number of remote clusters (the baseline when all left): what leaving kept. nil: not measured.
type Returned struct {
	RemoteClusters     int      // after the last leave
	LiveHeapBytes      *float64 // peak minus after the last leave
	RSSBytes           *float64
	LeftoverLiveHeap   *float64 // after the last leave minus the same-count join sample
	LeftoverRSSBytes   *float64
	PeakRemoteClusters int // at the last join
}

// MemoryReturned computes Returned; nil when there were no joins or no leaves.
func MemoryReturned(cp *report.ControlPlane) *Returned {
	if cp == nil || len(cp.Joins) == 0 || len(cp.Leaves) == 0 {
		return nil
	}
	peak := cp.Joins[len(cp.Joins)-1]
	last := cp.Leaves[len(cp.Leaves)-1]
	out := &Returned{RemoteClusters: last.RemoteClusters, PeakRemoteClusters: peak.RemoteClusters}
	out.LiveHeapBytes = sub(peak.LiveHeapBytes, last.LiveHeapBytes)
	out.RSSBytes = sub(peak.RSSBytes, last.RSSBytes)
	same := &cp.Baseline
	if last.RemoteClusters > 0 {
		same = nil
		for i := range cp.Joins {
			if cp.Joins[i].RemoteClusters == last.RemoteClusters {
				same = &cp.Joins[i].Sample
			}
		}
	}
	if same != nil {
		out.LeftoverLiveHeap = sub(last.LiveHeapBytes, same.LiveHeapBytes)
		out.LeftoverRSSBytes = sub(last.RSSBytes, same.RSSBytes)
	}
	return out
}

func sub(a, b *float64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	return report.F(*a - *b)
}
