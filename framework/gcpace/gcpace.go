// Package gcpace bounds how far the test process's heap outgrows what it holds. The test process
// shares the host with the clusters and istiods it measures, and its xDS clients decode bursts of
// pushes at every join: with Go's default pacing (the heap may grow to twice the live heap before
// a collection) its RSS reached 3.5 times its live heap in the published experiment (about 850 MB
// against 240 MB), memory the host then lacks. A soft memory limit that follows the live heap,
// with headroom, makes the collector run before that; the limit never sits below the live heap, so
// it cannot make the collector run without end.
package gcpace

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// MinHeadroom is the least room above the live heap the limit leaves, and the limit's floor:
// small runs collect as Go's default pacing would.
const MinHeadroom = 128 << 20

// Headroom is the room above the live heap, as a fraction of it, for large heaps: half where Go's
// default is all of it.
const Headroom = 0.5

// Limit is the soft memory limit for a process whose live heap is live and whose memory outside
// the heap (stacks, runtime metadata, buffers the runtime holds) is other.
func Limit(live, other uint64) int64 {
	room := max(uint64(MinHeadroom), uint64(Headroom*float64(live)))
	return int64(other + live + room)
}

// Pacer sets the process's soft memory limit from its live heap at every tick.
type Pacer struct {
	stop chan struct{}
	wg   sync.WaitGroup
	prev int64
}

// Start follows the live heap every interval, unless the user set GOMEMLIMIT, which then stays.
func Start(interval time.Duration) *Pacer {
	p := &Pacer{stop: make(chan struct{})}
	if os.Getenv("GOMEMLIMIT") != "" {
		return p
	}
	p.prev = debug.SetMemoryLimit(-1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			debug.SetMemoryLimit(Limit(read()))
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// Stop ends the following and puts back the limit the process had.
func (p *Pacer) Stop() {
	close(p.stop)
	p.wg.Wait()
	if p.prev != 0 {
		debug.SetMemoryLimit(p.prev)
	}
}

// read returns the live heap (as of the last collection) and the memory the runtime holds outside
// the heap's objects and free spans.
func read() (live, other uint64) {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	heap := v(2) + v(3) + v(4) + v(5)
	total := v(1)
	if total > heap {
		other = total - heap
	}
	return v(0), other
}
