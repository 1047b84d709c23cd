package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// snapshotFormat changes when what a restored cluster must hold changes in a way this package's
// sources do not show.
const snapshotFormat = "1"

// SnapshotSet describes s for a provider that restores workloads (cluster.Snapshots): the
// key covers the scale and the sources that write it (this package, read from the checkout at
// sourceRoot), so a change to either makes earlier snapshots stale; the provider adds what only
// it knows (binaries, the cluster, its addresses).
func SnapshotSet(s Scale, sourceRoot string) (cluster.WorkloadSet, error) {
	if err := s.validate(); err != nil {
		return cluster.WorkloadSet{}, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "format %s\nscale %d services %d pods %d namespaces %d nodes\n", snapshotFormat, s.Services, s.Pods, s.Namespaces, s.Nodes)
	files, err := filepath.Glob(filepath.Join(sourceRoot, "framework", "workload", "*.go"))
	if err != nil {
		return cluster.WorkloadSet{}, err
	}
	slices.Sort(files)
	read := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return cluster.WorkloadSet{}, fmt.Errorf("workload snapshot key: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(raw))
		h.Write(raw)
		read++
	}
	if read == 0 {
		return cluster.WorkloadSet{}, fmt.Errorf("workload snapshot key: no sources under %s/framework/workload", sourceRoot)
	}
	set := cluster.WorkloadSet{Key: hex.EncodeToString(h.Sum(nil))[:16], Pods: s.Pods}
	for k := range s.Nodes {
		set.Nodes = append(set.Nodes, NodeName(k))
	}
	for k := range s.Namespaces {
		set.Namespaces = append(set.Namespaces, NamespaceName(k))
	}
	return set, nil
}

// CheckRestored verifies that c holds s's workloads as Deploy leaves them (every scale service,
// and every scale pod Running, Ready and addressed on a fake node) and returns them as Deploy
// would. It is what a run that restored the workloads relies on instead of having written them.
func CheckRestored(ctx context.Context, c *cluster.Cluster, s Scale) (*Deployed, error) {
	start := time.Now()
	out := &Deployed{Cluster: c.Name}
	want := map[types.NamespacedName]bool{}
	for n := range s.Services {
		want[types.NamespacedName{Namespace: s.ServiceNamespace(n), Name: ServiceName(n)}] = true
	}
	for k := range s.Namespaces {
		ns := NamespaceName(k)
		out.Namespaces = append(out.Namespaces, ns)
		svcs, err := c.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: GlobalLabel + "=true"})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: listing restored services in %s: %w", c.Name, ns, err)
		}
		for _, svc := range svcs.Items {
			if id := (types.NamespacedName{Namespace: ns, Name: svc.Name}); want[id] {
				out.Services = append(out.Services, id)
			}
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: listing restored pods in %s: %w", c.Name, ns, err)
		}
		for _, p := range pods.Items {
			if !want[types.NamespacedName{Namespace: ns, Name: p.Labels["app"]}] {
				continue
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !podReady(&p) {
				return nil, fmt.Errorf("cluster %s: restored pod %s/%s is not Running, Ready and addressed (phase %s, IP %q)", c.Name, ns, p.Name, p.Status.Phase, p.Status.PodIP)
			}
			out.Pods++
		}
	}
	if len(out.Services) != s.Services || out.Pods != s.Pods {
		return nil, fmt.Errorf("cluster %s: the restored workloads hold %d of %d services and %d of %d pods", c.Name, len(out.Services), s.Services, out.Pods, s.Pods)
	}
	out.Elapsed = time.Since(start)
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
