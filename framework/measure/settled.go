package measure

import (
	"context"
	"fmt"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/stats"
	"time"
)

// Settled is istiod's memory once a join has settled.
type Settled struct {
	// RSSBytes is the median over the samples: it swings with GC and scavenger timing, so one
	// scrape is not representative.
	RSSBytes float64
	// HeapInuseBytes is HeapInuse right after the forced GCs: the spans the live objects hold, with
	// their unused slots. Scraped at other moments it measures where istiod was in its GC cycle
	// (how much it had allocated since the last collection) more than what it holds: the median of
	// the scrapes gave 4.8-8.3 MB per remote cluster across five runs of one experiment, each fit
	// claiming about ±1 MB.
	HeapInuseBytes float64
	// LiveHeapBytes is HeapAlloc right after two forced GCs (LiveHeapStats), taken once after the
	// last sample.
	LiveHeapBytes float64
	// WorkingSetBytes is the median of istiod's memory cgroup's working set (usage minus inactive
	// file pages, as kubelet reads a container's) over the samples; nil without a cgroup.
	WorkingSetBytes *float64
	// AfterGC is the full MemStats read with LiveHeapBytes.
	AfterGC MemStats
	// Samples are the scrapes, in order, without Families.
	Samples []*Metrics
}

// Settled scrapes istiod samples times, interval apart, then forces GCs and reads the live heap
// and heap in use (LiveHeapStats). The GCs come last because they shrink RSS, later: forcing them
// first would bias the median low. It takes about (samples-1)*interval plus the GCs.
func (i *Sampler) Settled(ctx context.Context, samples int, interval time.Duration) (Settled, error) {
	if samples < 1 {
		return Settled{}, fmt.Errorf("istiod %s: Settled needs at least one sample, got %d", i.Name, samples)
	}
	out := Settled{Samples: make([]*Metrics, 0, samples)}
	rss, ws := make([]float64, 0, samples), make([]float64, 0, samples)
	cgroup := ""
	if i.MemoryCgroup != nil {
		cgroup = i.MemoryCgroup()
	}
	t := time.NewTicker(max(interval, time.Millisecond))
	defer t.Stop()
	for n := range samples {
		if n > 0 {
			select {
			case <-ctx.Done():
				return Settled{}, fmt.Errorf("istiod %s: settling: %d of %d samples taken: %w", i.Name, n, samples, ctx.Err())
			case <-t.C:
			}
		}
		m, err := i.Scrape(ctx)
		if err != nil {
			return Settled{}, fmt.Errorf("settling, sample %d of %d: %w", n+1, samples, err)
		}
		// Callers keep Settled per join; the raw families are not needed for it.
		m.Families = nil
		out.Samples = append(out.Samples, m)
		rss = append(rss, m.ResidentMemoryBytes)
		if cgroup != "" {
			w, err := proc.WorkingSetBytes(cgroup)
			if err != nil {
				return Settled{}, fmt.Errorf("istiod %s: working set, sample %d of %d: %w", i.Name, n+1, samples, err)
			}
			ws = append(ws, w)
		}
	}
	if len(ws) > 0 {
		w := stats.Median(ws)
		out.WorkingSetBytes = &w
	}
	ms, err := i.LiveHeapStats(ctx)
	if err != nil {
		return Settled{}, fmt.Errorf("settling, live heap: %w", err)
	}
	out.RSSBytes = stats.Median(rss)
	out.HeapInuseBytes = float64(ms.HeapInuse)
	out.LiveHeapBytes = float64(ms.HeapAlloc)
	out.AfterGC = ms
	return out, nil
}
