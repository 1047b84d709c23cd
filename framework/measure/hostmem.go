package measure

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HostMemoryInUse is MemTotal - MemAvailable from /proc/meminfo: what the host's processes hold,
// page cache they could give back excluded.
func HostMemoryInUse() (uint64, error) {
	total, avail, err := meminfo()
	if err != nil {
		return 0, err
	}
	return total - avail, nil
}

// HostMemoryAvailable is /proc/meminfo's MemAvailable: what new processes can still get.
func HostMemoryAvailable() (uint64, error) {
	_, avail, err := meminfo()
	return avail, err
}

// readMeminfo returns MemTotal.
func readMeminfo() (uint64, error) {
	total, _, err := meminfo()
	return total, err
}

func meminfo() (total, avail uint64, err error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			total = kb * 1024
		case "MemAvailable:":
			avail = kb * 1024
		}
	}
	if total == 0 || avail == 0 || avail > total {
		return 0, 0, fmt.Errorf("/proc/meminfo: no MemTotal/MemAvailable")
	}
	return total, avail, nil
}

// PeakMemory samples HostMemoryInUse until stopped and keeps the highest value.
type PeakMemory struct {
	read func() (uint64, error)
	mu   sync.Mutex
	peak uint64
	stop chan struct{}
	done chan struct{}
}

// WatchPeakMemory starts sampling every interval.
func WatchPeakMemory(interval time.Duration) *PeakMemory {
	return watchPeak(interval, HostMemoryInUse)
}

func watchPeak(interval time.Duration, read func() (uint64, error)) *PeakMemory {
	p := &PeakMemory{read: read, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			p.sample()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *PeakMemory) sample() {
	if v, err := p.read(); err == nil {
		p.mu.Lock()
		p.peak = max(p.peak, v)
		p.mu.Unlock()
	}
}

// Peak returns the highest host memory in use seen so far (0 if none was read).
func (p *PeakMemory) Peak() uint64 {
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// Stop ends the sampling.
func (p *PeakMemory) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}
