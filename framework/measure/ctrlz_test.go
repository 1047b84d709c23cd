package measure

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"istio.io/istio/pkg/ctrlz"
)

// fakeCtrlz imitates ControlZ's memory topic: PUT /memj/forcecollection runs runtime.GC() and
// answers 202, GET /memj/ answers json.Marshal(runtime.MemStats) of this test process (so the JSON
// keys are the real field names). It logs requests and keeps the last MemStats it served.
type fakeCtrlz struct {
	mu   sync.Mutex
	log  []string
	last runtime.MemStats
}

func (f *fakeCtrlz) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, r.Method+" "+r.URL.Path)
	switch {
	case r.URL.Path == "/memj/forcecollection" && r.Method == http.MethodPut:
		runtime.GC()
		w.WriteHeader(http.StatusAccepted)
	case r.URL.Path == "/memj/forcecollection":
		// gorilla/mux's Methods("PUT") answers other methods with 405.
		w.WriteHeader(http.StatusMethodNotAllowed)
	case r.URL.Path == "/memj/" && r.Method == http.MethodGet:
		runtime.ReadMemStats(&f.last)
		b, err := json.Marshal(&f.last)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeCtrlz) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func TestLiveHeapStatsPutsForceCollectionTwiceThenReadsHeapAlloc(t *testing.T) {
	fake := &fakeCtrlz{}
	srv := loopbackServer(t, fake)
	i := &Sampler{Name: "cluster-1", CtrlzURL: srv.URL + "/"} // trailing slash tolerated

	live, err := i.LiveHeapStats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"PUT /memj/forcecollection", "PUT /memj/forcecollection", "GET /memj/"}, fake.requests())
	fake.mu.Lock()
	want := fake.last
	fake.mu.Unlock()
	assert.Equal(t, want.HeapAlloc, live.HeapAlloc)
	assert.Greater(t, live.HeapAlloc, uint64(0))

	ms, err := i.MemStats(context.Background())
	require.NoError(t, err)
	fake.mu.Lock()
	want = fake.last
	fake.mu.Unlock()
	assert.Equal(t, MemStats{
		HeapAlloc: want.HeapAlloc, HeapInuse: want.HeapInuse, HeapIdle: want.HeapIdle,
		HeapReleased: want.HeapReleased, Sys: want.Sys, NumGC: want.NumGC,
	}, ms)
}

func TestMemStatsRejectsBodiesThatAreNotMemStats(t *testing.T) {
	for name, body := range map[string]string{
		"other topic": `{"version":"1.30-dev"}`,
		"html":        `<html><body>Memory Usage</body></html>`,
	} {
		srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(body))
		}))
		_, err := (&Sampler{Name: "cluster-1", CtrlzURL: srv.URL}).MemStats(context.Background())
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "istiod cluster-1", name)
	}
}

func TestForceGCFailsOnHTTPError(t *testing.T) {
	srv := loopbackServer(t, http.NotFoundHandler())
	err := (&Sampler{Name: "cluster-1", CtrlzURL: srv.URL}).ForceGC(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
}

// A forced collection takes as long as istiod's heap and the host make it: the scrapes' client
// timeout (shortened here) must not cut it, while it still bounds a scrape.
func TestForceGCOutlastsTheScrapeTimeout(t *testing.T) {
	saved := defaultClient.Timeout
	defaultClient.Timeout = 50 * time.Millisecond
	t.Cleanup(func() { defaultClient.Timeout = saved })
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		w.WriteHeader(http.StatusAccepted)
	})
	i := &Sampler{Name: "cluster-1", CtrlzURL: loopbackServer(t, slow).URL}
	require.NoError(t, i.ForceGC(context.Background()))
	_, err := i.MemStats(context.Background())
	require.Error(t, err, "a scrape slower than the client timeout succeeded: the test no longer shows the difference")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = i.ForceGC(ctx)
	require.Error(t, err, "the caller's deadline must still bound a forced collection")
	assert.Contains(t, err.Error(), "a forced collection")
}

// istioControlZ runs Istio's real ControlZ server in this process on 127.0.0.1 until t ends.
func istioControlZ(t *testing.T) *Sampler {
	t.Helper()
	o := ctrlz.DefaultOptions()
	o.Address = "127.0.0.1"
	o.Port = 0
	s, err := ctrlz.Run(o, nil)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return &Sampler{Name: "ctrlz", CtrlzURL: "http://" + s.Address()}
}

// TestLiveHeapAgainstIstioControlZ runs Istio's real ControlZ server in this process on
// 127.0.0.1 and checks the paths and methods used here: the forced collection must show up as a
// completed GC cycle in the MemStats read afterwards.
func TestLiveHeapAgainstIstioControlZ(t *testing.T) {
	i := istioControlZ(t)

	before, err := i.MemStats(context.Background())
	require.NoError(t, err)
	require.NoError(t, i.ForceGC(context.Background()))
	after, err := i.MemStats(context.Background())
	require.NoError(t, err)
	assert.Greater(t, after.NumGC, before.NumGC, "PUT /memj/forcecollection ran no GC")
	assert.Greater(t, after.HeapAlloc, uint64(0))
	assert.Greater(t, after.Sys, after.HeapInuse)

	live, err := i.LiveHeapStats(context.Background())
	require.NoError(t, err)
	assert.Greater(t, live.HeapAlloc, uint64(0))
}

// TestLiveHeapLeavesOutPooledBuffers checks, against Istio's real ControlZ in this process, that
// the live heap does not count what a sync.Pool keeps: 64 MB parked in a pool must be gone from
// HeapAlloc, which one forced collection leaves in the pool's victim cache.
func TestLiveHeapLeavesOutPooledBuffers(t *testing.T) {
	i := istioControlZ(t)
	ctx := context.Background()

	const parked = 64 << 20
	var pool sync.Pool
	pool.Put(make([]byte, parked))
	require.NoError(t, i.ForceGC(ctx))
	one, err := i.MemStats(ctx)
	require.NoError(t, err)
	require.Greater(t, one.HeapAlloc, uint64(parked), "after one collection the pooled buffer should still be counted; if not, Go changed sync.Pool and one GC may do")

	pool.Put(make([]byte, parked))
	live, err := i.LiveHeapStats(ctx)
	require.NoError(t, err)
	assert.Less(t, live.HeapAlloc, uint64(parked/2), "the pooled 64 MB is counted as live heap")
	runtime.KeepAlive(&pool)
}
