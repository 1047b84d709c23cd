package report

import "github.com/ambientmc/ambientmc/framework/measure"

// MemorySample fills the memory fields of a Sample from istiod's settled state; the CPU fields
// stay absent, since they come from windows the caller chooses (SetCPU).
func MemorySample(s measure.Settled) Sample {
	return Sample{RSSBytes: F(s.RSSBytes), HeapInuseBytes: F(s.HeapInuseBytes), LiveHeapBytes: F(s.LiveHeapBytes), WorkingSetBytes: s.WorkingSetBytes}
}

// SetCPU sets the blended and steady CPU figures of s, each with its resolution in cores.
func (s *Sample) SetCPU(blended, steady measure.CPUSpan) {
	s.CPUCores, s.CPUCoresResolution = F(blended.Cores()), F(blended.CoresResolution())
	s.SteadyCPUCores, s.SteadyCPUCoresResolution = F(steady.Cores()), F(steady.CoresResolution())
}
