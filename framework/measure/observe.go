package measure

import (
	"context"
	"sync"
)

// ProcessCPU reads the scheduler's counters of whichever process pid names now: a restart in
// place gives istiod a new PID, whose counters start afresh.
func ProcessCPU(pid func() int) CPUSource { return &hostProcess{pid: pid} }

// hostProcess is Schedstat for whichever process is istiod now: a restart in place gives it a new
// PID, whose counters start afresh.
type hostProcess struct {
	pid func() int
	mu  sync.Mutex
	s   *Schedstat
}

func (h *hostProcess) current() *Schedstat {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pid := h.pid(); h.s == nil || h.s.PID != pid {
		h.s = NewSchedstat(pid)
	}
	return h.s
}

func (h *hostProcess) CPUSeconds(ctx context.Context) (float64, error) {
	return h.current().CPUSeconds(ctx)
}

func (*hostProcess) Resolution() float64 { return SchedstatResolution }
func (*hostProcess) Name() string        { return SchedstatName }
