package measure

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// HostCPU is a reading of the machine-wide CPU counters in /proc/stat.
type HostCPU struct{ busy, total uint64 }

// HostSaturated is the share of host CPU in use above which a figure measured meanwhile says more
// about the machine than the mesh (a latency, a join's convergence and CPU include waiting for a CPU).
const HostSaturated = 0.9

// ReadHostCPU reads /proc/stat's aggregate cpu line.
func ReadHostCPU() (HostCPU, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return HostCPU{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return HostCPU{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var h HostCPU
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return HostCPU{}, fmt.Errorf("/proc/stat: %w", err)
		}
		h.total += v
		// idle (3) and iowait (4) are not busy.
		if i != 3 && i != 4 {
			h.busy += v
		}
	}
	return h, nil
}

// BusySince is the fraction of all cores that was busy between two readings (0..1).
func (h HostCPU) BusySince(before HostCPU) float64 {
	if h.total <= before.total {
		return 0
	}
	return float64(h.busy-before.busy) / float64(h.total-before.total)
}
