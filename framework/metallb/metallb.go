// Package metallb installs MetalLB, the LoadBalancer implementation of clusters on a Docker
// network, from the manifest the pinned istio.io/istio module ships, and gives it one pool: what
// assigns the east-west gateways their addresses on kind.
package metallb

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/kube/apply"
)

const (
	// Pool names the IPAddressPool and L2Advertisement the framework creates.
	Pool = "ambientmc"
	// Namespace is where metallb-native.yaml installs MetalLB.
	Namespace = "metallb-system"
)

// Manifest returns the path of metallb-native.yaml in the pinned istio.io/istio module
// (images.MetalLBManifestPath).
func Manifest(ctx context.Context) (string, error) {
	c, err := bins.Default()
	if err != nil {
		return "", err
	}
	return images.MetalLBManifestPath(ctx, c)
}

// decodeObjects reads a multi-document YAML file into objects, skipping empty documents.
func decodeObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return apply.Decode(f, path)
}

// Install installs MetalLB from manifest into c, waits for its controller and speaker, and
// gives it pool (retrying while MetalLB's webhook comes up).
func Install(ctx context.Context, c *cluster.Cluster, manifest string, pool netip.Prefix, timeout time.Duration) error {
	objs, err := decodeObjects(manifest)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a := apply.New(c.Dynamic, c.Client.Discovery())
	for _, o := range objs {
		if err := applyObject(ctx, a, o); err != nil {
			return fmt.Errorf("cluster %s: MetalLB: %w", c.Name, err)
		}
	}
	if pending, err := a.WaitEstablished(ctx, 0); err != nil {
		return fmt.Errorf("cluster %s: MetalLB: CRDs not established: %s: %w", c.Name, strings.Join(pending, ", "), err)
	}
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(Namespace).Get(ctx, "controller", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas < 1 {
			return false, nil
		}
		ds, err := c.Client.AppsV1().DaemonSets(Namespace).Get(ctx, "speaker", metav1.GetOptions{})
		return err == nil && ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: MetalLB controller and speaker not ready within %s (kubectl -n %s get pods)", c.Name, timeout, Namespace)
	}
	var last error
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, o := range Objects(pool) {
			if last = applyObject(ctx, a, o); last != nil {
				return false, nil // the webhook answers only once the controller serves it
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: MetalLB pool %s: %v", c.Name, pool, last)
	}
	return nil
}

// applyObject server-side applies one object, naming it in the error.
func applyObject(ctx context.Context, a *apply.Applier, o *unstructured.Unstructured) error {
	if _, err := a.Apply(ctx, o); err != nil {
		return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// Objects are the pool and its L2 advertisement for one cluster (avoidBuggyIPs skips
// addresses ending in .0 and .255).
func Objects(pool netip.Prefix) []*unstructured.Unstructured {
	meta := map[string]any{"name": Pool, "namespace": Namespace}
	return []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": meta,
			"spec": map[string]any{"addresses": []any{pool.String()}, "avoidBuggyIPs": true},
		}},
		{Object: map[string]any{
			"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement", "metadata": copyMap(meta),
			"spec": map[string]any{"ipAddressPools": []any{Pool}},
		}},
	}
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// YAML is Objects(pool) as a YAML stream.
func YAML(pool netip.Prefix) ([]byte, error) {
	var b bytes.Buffer
	for _, o := range Objects(pool) {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes(), nil
}
