package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/etcdstate"
	"github.com/ambientmc/ambientmc/framework/hostetcd"
	"github.com/ambientmc/ambientmc/topology"
)

// A workload snapshot is one cluster's scale workloads exactly as its API server and
// controller-manager stored them in etcd (nodes and their leases, namespaces, service accounts,
// services with their cluster IPs, pods with the status a kubelet wrote, EndpointSlices and
// Endpoints), captured after a run wrote them through the API. A later run with the same inputs
// stores it under the new cluster's prefix before the API server starts, so the API server, the
// controller-manager and istiod start on the same objects without the minutes of writes. Nothing
// of the mesh is in it (no configmap, secret or event), and every key a cluster's snapshot holds
// is named by the workload set, so nothing of another run's mesh comes back.

// Workloads are restored from snapshotMinPods pods per cluster or snapshotMinRunPods in the run:
// below both writing them takes seconds, above either minutes (100 small clusters: 10,000 pods in
// more than 9 minutes on 2 cores in the runs of 2026-12-05,
// docs/log/measurements-2026-12.md#100-clusters-with-lighter-watched-only-clusters-issue-36-item-2).
const (
	snapshotMinPods    = 1000
	snapshotMinRunPods = 5000
)

// snapshotsApply says whether a run of that many clusters with pods each restores its workloads.
func snapshotsApply(pods, clusters int) bool {
	return pods >= snapshotMinPods || pods*clusters >= snapshotMinRunPods
}

// PreloadWorkloads tells Create what every cluster gets (see the top of this file). Where
// snapshots do not apply (snapshotsApply), or are turned off, it does nothing.
func (p *Provider) PreloadWorkloads(w cluster.WorkloadSet) error {
	if p.paths == nil {
		return fmt.Errorf("local provider: Preflight must run before PreloadWorkloads")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opts.NoWorkloadSnapshots || !snapshotsApply(w.Pods, p.clusters) {
		return nil
	}
	p.workloads = &w
	return nil
}

// RestoredWorkloads says whether cluster name started holding its workloads, and from which file.
func (p *Provider) RestoredWorkloads(name string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	from, ok := p.restored[name]
	return from, ok
}

// snapshotDir is where snapshots are kept: in the binary cache, beside the kube-apiserver's folder
// (tests set snapDir).
func (p *Provider) snapshotDir() string {
	if p.snapDir != "" {
		return p.snapDir
	}
	return filepath.Join(filepath.Dir(filepath.Dir(p.paths[bins.KubeAPIServer])), "workload-snapshots")
}

// snapshotFile names tc's snapshot of w: the key adds to w's everything of this provider that
// shapes what is stored (the API server's and controller-manager's builds, whether controllers
// run and which (a watched-only cluster's differ), the cluster and its address plan).
func (p *Provider) snapshotFile(w *cluster.WorkloadSet, tc topology.Cluster) (string, error) {
	addrs, err := addresses(tc.Index)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range []any{w, tc, addrs, p.paths[bins.KubeAPIServer], p.paths[bins.KubeControllerManager], !p.opts.NoControllers, p.watchedOnly(tc.Name)} {
		raw, err := json.Marshal(part)
		if err != nil {
			return "", err
		}
		h.Write(raw)
		h.Write([]byte{'\n'})
	}
	return filepath.Join(p.snapshotDir(), snapshotSlot(tc.Name, w.Pods)+hex.EncodeToString(h.Sum(nil))[:16]+".gob.gz"), nil
}

// snapshotSlot is the start of the file name of cluster's snapshots of pods pods each: the cache
// keeps one per slot, so a run at one scale leaves another scale's snapshot of the same cluster.
func snapshotSlot(cluster string, pods int) string {
	return fmt.Sprintf("%s-%dpods-", cluster, pods)
}

// restoreWorkloads stores tc's snapshot, if one of the preloaded set exists, under its prefix
// before its API server starts. A damaged snapshot is removed and the workloads are written as
// if there were none.
func (p *Provider) restoreWorkloads(ctx context.Context, etcd *hostetcd.Etcd, tc topology.Cluster) error {
	p.mu.Lock()
	w := p.workloads
	p.mu.Unlock()
	if w == nil {
		return nil
	}
	file, err := p.snapshotFile(w, tc)
	if err != nil {
		return err
	}
	s, err := etcdstate.ReadSnapshot(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		fmt.Fprintf(p.opts.Log, "ambientmc: %s: workload snapshot %s unreadable, writing the workloads through the API: %v\n", tc.Name, file, err)
		return os.Remove(file)
	}
	if err := etcd.PutAll(ctx, hostetcd.Prefix(tc.Name), s.Entries); err != nil {
		return fmt.Errorf("storing the workload snapshot %s: %w", file, err)
	}
	p.mu.Lock()
	if p.restored == nil {
		p.restored = map[string]string{}
	}
	p.restored[tc.Name] = fmt.Sprintf("%s (captured %s)", file, s.Created.UTC().Format(time.RFC3339))
	p.mu.Unlock()
	return nil
}

// SaveWorkloads captures c's workloads as its snapshot for later runs (unless it started from one)
// and removes c's snapshots of other inputs at the same pods per cluster, so the cache holds one
// per cluster name and scale.
func (p *Provider) SaveWorkloads(ctx context.Context, c *cluster.Cluster) error {
	p.mu.Lock()
	w, etcd, restored := p.workloads, p.etcd, p.restored[c.Name] != ""
	p.mu.Unlock()
	if w == nil || etcd == nil || restored {
		return nil
	}
	file, err := p.snapshotFile(w, c.Cluster)
	if err != nil {
		return err
	}
	entries, err := etcdstate.CaptureWorkloads(ctx, etcd, c, w)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if err := etcdstate.WriteSnapshot(file, &etcdstate.Snapshot{Created: time.Now(), Entries: entries}); err != nil {
		return err
	}
	others, _ := filepath.Glob(filepath.Join(filepath.Dir(file), snapshotSlot(c.Name, w.Pods)+"*.gob.gz"))
	for _, o := range others {
		if o != file {
			_ = os.Remove(o)
		}
	}
	return nil
}
