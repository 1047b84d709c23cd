package measure

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSettledTakesMedianRSSAndHeapsAfterSamples(t *testing.T) {
	// RSS and heap in use swing between scrapes; the median RSS is 250 MB, heap in use is read
	// after the forced GC, not from the scrapes.
	rss := []float64{300e6, 100e6, 250e6, 900e6, 200e6}
	heap := []float64{150e6, 400e6, 180e6, 170e6, 190e6}
	fake := &fakeCtrlz{}
	var scrapes atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/memj/", fake)
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		k := int(scrapes.Add(1)) - 1
		fake.mu.Lock()
		fake.log = append(fake.log, "scrape")
		fake.mu.Unlock()
		serveText(w, exposition(10+float64(k), rss[k%len(rss)], heap[k%len(heap)], fixtureSynced))
	})
	srv := loopbackServer(t, mux)
	i := &Sampler{Name: "cluster-1", MetricsURL: srv.URL + "/metrics", CtrlzURL: srv.URL}

	const interval = 15 * time.Millisecond
	start := time.Now()
	s, err := i.Settled(context.Background(), len(rss), interval)
	require.NoError(t, err)

	assert.Equal(t, 250e6, s.RSSBytes)
	require.Len(t, s.Samples, len(rss))
	assert.GreaterOrEqual(t, time.Since(start), time.Duration(len(rss)-1)*interval-5*time.Millisecond)
	// The forced GCs must come after every sample: they would shrink what they measure.
	assert.Equal(t, "scrape,scrape,scrape,scrape,scrape,PUT /memj/forcecollection,PUT /memj/forcecollection,GET /memj/",
		strings.Join(fake.requests(), ","))
	fake.mu.Lock()
	assert.Equal(t, float64(fake.last.HeapAlloc), s.LiveHeapBytes)
	assert.Equal(t, fake.last.HeapAlloc, s.AfterGC.HeapAlloc)
	assert.Equal(t, float64(fake.last.HeapInuse), s.HeapInuseBytes)
	fake.mu.Unlock()

	assert.Equal(t, 10.0, s.Samples[0].CPUSecondsTotal)
	assert.Equal(t, 14.0, s.Samples[4].CPUSecondsTotal)
}

func TestSettledFailsWithoutSamplesOrLiveHeap(t *testing.T) {
	_, err := (&Sampler{Name: "cluster-1"}).Settled(context.Background(), 0, time.Millisecond)
	assert.Error(t, err)

	// Metrics work but ControlZ does not: no Settled without the live heap.
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			serveText(w, exposition(1, 3e8, 2e8, fixtureSynced))
			return
		}
		http.NotFound(w, r)
	}))
	i := &Sampler{Name: "cluster-1", MetricsURL: srv.URL + "/metrics", CtrlzURL: srv.URL}
	_, err = i.Settled(context.Background(), 2, time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "live heap")
	assert.Contains(t, err.Error(), "404")
}

func TestSettledStopsWhenContextEnds(t *testing.T) {
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveText(w, exposition(1, 3e8, 2e8, fixtureSynced))
	}))
	i := &Sampler{Name: "cluster-1", MetricsURL: srv.URL, CtrlzURL: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := i.Settled(ctx, 100, 20*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "istiod cluster-1")
}
