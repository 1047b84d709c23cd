package measure

import (
	"context"
	"sync"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// Observe is a sampler of the istiod at e: CPU from the scheduler's counters where istiod runs on
// this host, else from process_cpu_seconds_total.
func Observe(e cluster.IstiodEndpoints) *Istiod {
	i := &Istiod{Name: e.Name, MetricsURL: e.MetricsURL, CtrlzURL: e.CtrlzURL, DebugURL: e.DebugURL}
	if e.PID != nil {
		i.CPU = &hostProcess{pid: e.PID}
	}
	i.MemoryCgroup = e.MemoryCgroup
	return i
}

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
