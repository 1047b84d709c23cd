package etcdstate

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/gob"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostetcd"
)

// Snapshot is a workload snapshot file: the entries' keys are below the cluster's prefix.
type Snapshot struct {
	Created time.Time
	Entries []hostetcd.KV
}

// CaptureWorkloads reads every key of w's objects in c: the nodes and their leases, the
// namespaces, the namespaced kinds the workloads consist of (no configmap, secret or event: those
// hold a run's certificates or history), and the IPAddress objects of the services' cluster IPs.
// It refuses a capture that does not hold every pod.
func CaptureWorkloads(ctx context.Context, etcd *hostetcd.Etcd, c *cluster.Cluster, w *cluster.WorkloadSet) ([]hostetcd.KV, error) {
	prefix := hostetcd.Prefix(c.Name)
	var out []hostetcd.KV
	add := func(key string, exact bool) (int, error) {
		var kvs []hostetcd.KV
		var err error
		if exact {
			kvs, err = etcd.Get(ctx, prefix+key)
		} else {
			kvs, err = etcd.RangePrefix(ctx, prefix+key)
		}
		if err != nil {
			return 0, err
		}
		for _, x := range kvs {
			out = append(out, hostetcd.KV{Key: []byte(strings.TrimPrefix(string(x.Key), prefix)), Value: x.Value})
		}
		return len(kvs), nil
	}
	for _, n := range w.Nodes {
		for _, key := range []string{"/minions/" + n, "/leases/kube-node-lease/" + n} {
			if got, err := add(key, true); err != nil || got != 1 {
				return nil, fmt.Errorf("cluster %s: workload snapshot: %s: %d keys (%v)", c.Name, key, got, err)
			}
		}
	}
	pods := 0
	for _, ns := range w.Namespaces {
		if got, err := add("/namespaces/"+ns, true); err != nil || got != 1 {
			return nil, fmt.Errorf("cluster %s: workload snapshot: namespace %s: %d keys (%v)", c.Name, ns, got, err)
		}
		for _, kind := range []string{"pods", "services/specs", "services/endpoints", "endpointslices", "serviceaccounts"} {
			got, err := add("/"+kind+"/"+ns+"/", false)
			if err != nil {
				return nil, err
			}
			if kind == "pods" {
				pods += got
			}
		}
		svcs, err := c.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: workload snapshot: %w", c.Name, err)
		}
		for _, s := range svcs.Items {
			for _, ip := range s.Spec.ClusterIPs {
				if got, err := add("/ipaddresses/"+ip, true); err != nil || got != 1 {
					return nil, fmt.Errorf("cluster %s: workload snapshot: the IPAddress of %s/%s (%s): %d keys (%v)", c.Name, ns, s.Name, ip, got, err)
				}
			}
		}
	}
	if pods != w.Pods {
		return nil, fmt.Errorf("cluster %s: workload snapshot: %d pods stored, the workloads have %d", c.Name, pods, w.Pods)
	}
	return out, nil
}

// ReadSnapshot reads a snapshot file WriteSnapshot wrote.
func ReadSnapshot(file string) (*Snapshot, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var s Snapshot
	if err := gob.NewDecoder(z).Decode(&s); err != nil {
		return nil, err
	}
	if len(s.Entries) == 0 {
		return nil, fmt.Errorf("no entries")
	}
	return &s, nil
}

// WriteSnapshot writes s, compressed, whole (WriteWhole).
func WriteSnapshot(file string, s *Snapshot) error {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	if err := gob.NewEncoder(z).Encode(s); err != nil {
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	return WriteWhole(file, buf.Bytes())
}
