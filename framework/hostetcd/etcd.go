// Package hostetcd is one etcd process on this host that many API servers share, each under its
// own key prefix (Prefix), and a small client of its JSON gateway (/v3/...), which needs no etcd
// client module: what the local provider stores its clusters in, and reads and writes directly
// for the CRD seeds and the workload snapshots it starts clusters from.
package hostetcd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/proc"
)

// Etcd is the one etcd every cluster of a run stores its objects in, each API server under
// its own key prefix (Prefix). One etcd for ten clusters holds far less memory than ten.
// Compaction and the revision counter are then shared; TestSharedEtcdCompactionKeepsClustersApart
// shows that neither breaks one cluster's objects or watches when another churns.
type Etcd struct {
	url string

	mu   sync.Mutex
	proc *proc.Process
}

// etcdQuota bounds the shared database. Published scale loads about 100-160 MB per cluster
// (notes/istio-embedded.md section 10), so 50 clusters need about 8 GB; the file is sparse.
const etcdQuota = 16 << 30

// Prefix is cluster name's key prefix. It ends in /registry so that no prefix is a prefix of
// another cluster's (cluster-1 vs cluster-10).
func Prefix(name string) string { return "/ambientmc/" + name + "/registry" }

// etcdTimingArgs sizes etcd's request timeout (5 s + twice the election timeout) for the number of
// API servers it serves. Past 25 clusters they can hold both cores for minutes, and requests wait
// for a CPU: at 50 clusters (medium scale) 114 applies took over the default 7 s, the slowest
// 8.7 s, and the API servers failed with "etcdserver: request timed out". A 5 s election timeout
// gives 15 s; it also delays the single member's first election, so etcd serves after ~4.5 s
// instead of ~0.2 s, which is why smaller runs keep the default. Slow applies stay in etcd.log.
func etcdTimingArgs(clusters int) []string {
	if clusters <= 25 {
		return nil
	}
	return []string{"--election-timeout=5000", "--heartbeat-interval=500"}
}

// Nice is the CPU priority of the shared etcd above 25 clusters: 50 idle API servers and
// controller-managers keep 2 cores saturated (load average 30-45), one such run had a Service
// create time out after the API server's 60 s, and etcd, which every cluster's writes wait on,
// gets no more CPU than any of a hundred busy processes. Smaller runs keep the default.
func Nice(clusters int) (int, bool) {
	if clusters <= 25 {
		return 0, false
	}
	return -10, true
}

// The raft entries the single member keeps in memory: a snapshot every etcdSnapshotCount
// commits, etcdCatchupEntries kept after it.
const (
	etcdSnapshotCount  = 2000
	etcdCatchupEntries = 500
)

// Start starts the shared etcd for clusters API servers in dir and waits until it serves.
func Start(ctx context.Context, dir, binary string, clusters int, timeout time.Duration) (*Etcd, error) {
	for attempt := 1; ; attempt++ {
		e, collided, err := tryStartEtcd(ctx, dir, binary, clusters, timeout)
		if err == nil || !collided || attempt == portAttempts || ctx.Err() != nil {
			return e, err
		}
	}
}

// tryStartEtcd starts etcd once; collided says whether it failed because a port was taken.
func tryStartEtcd(ctx context.Context, dir, binary string, clusters int, timeout time.Duration) (*Etcd, bool, error) {
	if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
		return nil, false, err
	}
	ports, err := proc.FreePorts(2)
	if err != nil {
		return nil, false, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	p, err := proc.Start(proc.Spec{
		Name: "etcd",
		Path: binary,
		Args: append([]string{
			"--name=ambientmc",
			"--data-dir=" + filepath.Join(dir, "data"),
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=ambientmc=" + peerURL,
			// Test data is thrown away at the end: fsync only costs time.
			"--unsafe-no-fsync=true",
			"--quota-backend-bytes=" + strconv.Itoa(etcdQuota),
			// One member and no follower to catch up: etcd's defaults keep the last 15,000 raft
			// entries in memory (10,000 to a snapshot, 5,000 after it), at the published scale
			// most of them whole pods (docs/measurements.md#the-published-experiment).
			"--snapshot-count=" + strconv.Itoa(etcdSnapshotCount),
			"--snapshot-catchup-entries=" + strconv.Itoa(etcdCatchupEntries),
			"--log-level=warn",
		}, etcdTimingArgs(clusters)...),
		LogFile: filepath.Join(dir, "etcd.log"),
	})
	if err != nil {
		return nil, false, fmt.Errorf("starting etcd: %w", err)
	}
	e := &Etcd{url: clientURL, proc: p}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.WaitReady(wctx, 50*time.Millisecond, proc.HTTPProbe(clientURL+"/health", "")); err != nil {
		collided := p.LogContains("address already in use")
		e.Stop()
		return nil, collided, err
	}
	return e, false, nil
}

func (e *Etcd) Process() *proc.Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proc
}

// URL is where etcd serves its clients (the API servers' --etcd-servers).
func (e *Etcd) URL() string { return e.url }

// Stop stops etcd and waits for it (a no-op once stopped).
func (e *Etcd) Stop() { proc.StopSlot(&e.mu, &e.proc, stopGrace) }

// stopGrace is how long etcd may take to stop after SIGTERM.
const stopGrace = 5 * time.Second

// portAttempts bounds the starts that lose a free port to another process between choosing and
// binding it.
const portAttempts = 3

// The helpers below speak etcd's JSON gateway (/v3/...), which needs no client module.

// Call posts req as JSON to etcd's gateway path and decodes the answer into resp.
func (e *Etcd) Call(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(res.Body)
		return fmt.Errorf("etcd %s: %s: %s", path, res.Status, bytes.TrimSpace(msg.Bytes()))
	}
	if resp == nil {
		return nil
	}
	return json.NewDecoder(res.Body).Decode(resp)
}

// Status is the part of etcd's maintenance status the report uses.
type Status struct {
	DBSize      int64 `json:"dbSize,string"`
	DBSizeInUse int64 `json:"dbSizeInUse,string"`
	Header      struct {
		Revision int64 `json:"revision,string"`
	} `json:"header"`
}

// ReadStatus returns the database size and the current revision.
func (e *Etcd) ReadStatus(ctx context.Context) (Status, error) {
	var s Status
	return s, e.Call(ctx, "/v3/maintenance/status", struct{}{}, &s)
}

// Compact discards every revision before rev, for all clusters at once.
func (e *Etcd) Compact(ctx context.Context, rev int64) error {
	return e.Call(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil)
}

// KV is one key and value.
type KV struct {
	Key, Value []byte
}

// RangePrefix returns every key under prefix with its value, a page at a time (a cluster's pods
// at published scale are tens of megabytes).
func (e *Etcd) RangePrefix(ctx context.Context, prefix string) ([]KV, error) {
	var out []KV
	from, end := prefix, prefixEnd(prefix)
	for {
		page, more, err := e.RangeFrom(ctx, from, end, RangePage)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if !more || len(page) == 0 {
			return out, nil
		}
		from = string(page[len(page)-1].Key) + "\x00"
	}
}

// RangePage is how many keys one range request returns.
const RangePage = 1000

// Get returns key's value, or nothing when it does not exist.
func (e *Etcd) Get(ctx context.Context, key string) ([]KV, error) {
	kvs, _, err := e.RangeFrom(ctx, key, "", 0)
	return kvs, err
}

// RangeFrom returns up to limit keys (0: all) in [from, end), or key from alone when end is "",
// and whether more follow.
func (e *Etcd) RangeFrom(ctx context.Context, from, end string, limit int) ([]KV, bool, error) {
	var resp struct {
		KVs []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"kvs"`
		More bool `json:"more"`
	}
	req := map[string]any{"key": b64(from)}
	if end != "" {
		req["range_end"] = b64(end)
	}
	if limit > 0 {
		req["limit"] = strconv.Itoa(limit)
	}
	if err := e.Call(ctx, "/v3/kv/range", req, &resp); err != nil {
		return nil, false, err
	}
	out := make([]KV, 0, len(resp.KVs))
	for _, x := range resp.KVs {
		k, err := base64.StdEncoding.DecodeString(x.Key)
		if err != nil {
			return nil, false, err
		}
		v, err := base64.StdEncoding.DecodeString(x.Value)
		if err != nil {
			return nil, false, err
		}
		out = append(out, KV{k, v})
	}
	return out, resp.More, nil
}

// PutAll writes every entry below prefix, many to a transaction (within etcd's default 128
// operations and 1.5 MiB per request).
func (e *Etcd) PutAll(ctx context.Context, prefix string, entries []KV) error {
	const maxOps, maxBytes = 128, 1 << 20
	var ops []map[string]any
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := e.Call(ctx, "/v3/kv/txn", map[string]any{"success": ops}, nil)
		ops, size = ops[:0], 0
		return err
	}
	for _, x := range entries {
		if len(ops) == maxOps || (len(ops) > 0 && size+len(x.Value) > maxBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		ops = append(ops, map[string]any{"request_put": map[string]string{
			"key": b64(prefix + string(x.Key)), "value": base64.StdEncoding.EncodeToString(x.Value)}})
		size += len(x.Key) + len(x.Value)
	}
	return flush()
}

// Put writes one key.
func (e *Etcd) Put(ctx context.Context, key string, value []byte) error {
	return e.Call(ctx, "/v3/kv/put", map[string]string{"key": b64(key), "value": base64.StdEncoding.EncodeToString(value)}, nil)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// prefixEnd is the first key after every key that starts with prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}
