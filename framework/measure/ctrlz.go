package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ControlZ paths of istiod's memory topic (istio.io/istio pkg/ctrlz/topics/mem.go: prefix "mem",
// JSON router at "/memj"; pkg/ctrlz/ctrlz.go). GET answers runtime.MemStats as JSON; PUT on
// forcecollection runs runtime.GC(), which returns only once the collection is complete, and
// answers 202.
const (
	CtrlzMemPath   = "/memj/"
	CtrlzForceGC   = "/memj/forcecollection"
	ctrlzBodyLimit = 1 << 20
)

// MemStats is the part of istiod's runtime.MemStats this framework reads; the JSON keys are
// runtime.MemStats field names.
type MemStats struct {
	HeapAlloc    uint64 // bytes of reachable plus not yet swept objects; live heap right after a GC
	HeapInuse    uint64
	HeapIdle     uint64
	HeapReleased uint64
	Sys          uint64
	NumGC        uint32 // completed GC cycles: lets a caller check a forced GC happened
}

// forceGCTimeout bounds one forced collection instead of the scrapes' client timeout: its time
// grows with istiod's heap and with the host's load (at 100 clusters a 380 MB heap's took more than
// the scrapes' 10 s), and a wedged istiod still fails.
const forceGCTimeout = 2 * time.Minute

// gcClient is defaultClient without its timeout: ForceGC's context bounds the request.
var gcClient = &http.Client{Transport: defaultClient.Transport}

// ForceGC asks istiod to run a complete garbage collection (ControlZ PUT /memj/forcecollection).
func (i *Sampler) ForceGC(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, forceGCTimeout)
	defer cancel()
	u := strings.TrimRight(i.CtrlzURL, "/") + CtrlzForceGC
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, nil)
	if err != nil {
		return fmt.Errorf("istiod %s: ctrlz request: %w", i.Name, err)
	}
	client := i.Client
	if client == nil {
		client = gcClient
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("istiod %s: PUT %s (a forced collection, after %s of at most %s): %w", i.Name, u, time.Since(start).Round(time.Millisecond), forceGCTimeout, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, ctrlzBodyLimit))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("istiod %s: PUT %s: HTTP %s: %s", i.Name, u, resp.Status, snippet(body))
	}
	return nil
}

// MemStats reads istiod's runtime.MemStats from ControlZ (GET /memj/).
func (i *Sampler) MemStats(ctx context.Context) (MemStats, error) {
	u := strings.TrimRight(i.CtrlzURL, "/") + CtrlzMemPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return MemStats{}, fmt.Errorf("istiod %s: ctrlz request: %w", i.Name, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := i.client().Do(req)
	if err != nil {
		return MemStats{}, fmt.Errorf("istiod %s: GET %s: %w", i.Name, u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, ctrlzBodyLimit))
	if err != nil {
		return MemStats{}, fmt.Errorf("istiod %s: GET %s: reading body: %w", i.Name, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return MemStats{}, fmt.Errorf("istiod %s: GET %s: HTTP %s: %s", i.Name, u, resp.Status, snippet(body))
	}
	// Decode into pointers so that a body lacking the fields (an HTML page, another topic) is an
	// error instead of zeros.
	var raw struct {
		HeapAlloc, HeapInuse, HeapIdle, HeapReleased, Sys *uint64
		NumGC                                             *uint32
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return MemStats{}, fmt.Errorf("istiod %s: GET %s: decoding memstats: %w (body %s)", i.Name, u, err, snippet(body))
	}
	if raw.HeapAlloc == nil || raw.HeapInuse == nil || raw.HeapIdle == nil || raw.HeapReleased == nil || raw.Sys == nil || raw.NumGC == nil {
		return MemStats{}, fmt.Errorf("istiod %s: GET %s: body lacks runtime.MemStats fields: %s", i.Name, u, snippet(body))
	}
	return MemStats{
		HeapAlloc:    *raw.HeapAlloc,
		HeapInuse:    *raw.HeapInuse,
		HeapIdle:     *raw.HeapIdle,
		HeapReleased: *raw.HeapReleased,
		Sys:          *raw.Sys,
		NumGC:        *raw.NumGC,
	}, nil
}

// LiveHeapStats forces two collections, then reads MemStats: HeapAlloc is then the live heap,
// istiod's structural memory cost, free of GC and scavenger timing. Allocations between the last
// GC and the read (small when idle) are included.
//
// Two, because one keeps every sync.Pool's contents alive: a collection moves each pool's objects
// to its victim cache, and only the next frees them; gRPC's and the xDS encoders' buffer pools
// hold megabytes, depending on what istiod had just pushed
// (docs/measurements.md#why-the-settings-are-what-they-are).
func (i *Sampler) LiveHeapStats(ctx context.Context) (MemStats, error) {
	for range 2 {
		if err := i.ForceGC(ctx); err != nil {
			return MemStats{}, err
		}
	}
	return i.MemStats(ctx)
}
