package kind

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/kube/apply"
)

// MetalLBManifest returns the path of metallb-native.yaml in the pinned istio.io/istio module
// (images.MetalLBManifestPath).
func MetalLBManifest(ctx context.Context) (string, error) {
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

// InstallMetalLB installs MetalLB from manifest into c, waits for its controller and speaker, and
// gives it pool (retrying while MetalLB's webhook comes up).
func InstallMetalLB(ctx context.Context, c *cluster.Cluster, manifest string, pool netip.Prefix, timeout time.Duration) error {
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
		d, err := c.Client.AppsV1().Deployments(MetalLBNamespace).Get(ctx, "controller", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas < 1 {
			return false, nil
		}
		ds, err := c.Client.AppsV1().DaemonSets(MetalLBNamespace).Get(ctx, "speaker", metav1.GetOptions{})
		return err == nil && ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: MetalLB controller and speaker not ready within %s (kubectl -n %s get pods)", c.Name, timeout, MetalLBNamespace)
	}
	var last error
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, o := range MetalLBObjects(pool) {
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

// loadBalancers cuts one pool per cluster from the kind network and installs MetalLB with it.
func (p *Provider) loadBalancers(ctx context.Context, cs []*cluster.Cluster) error {
	p.mu.Lock()
	net := p.net
	p.mu.Unlock()
	if err := CheckPlan(net, len(cs)); err != nil {
		return err
	}
	maxIndex := 0
	for _, c := range cs {
		maxIndex = max(maxIndex, c.Index)
	}
	pools, err := Pools(net, maxIndex)
	if err != nil {
		return err
	}
	sem := make(chan struct{}, p.opts.Parallel)
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range cs {
		g.Go(func() error {
			sem <- struct{}{}
			defer func() { <-sem }()
			pool := pools[c.Index-1]
			start := time.Now()
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: installing MetalLB with pool %s (cut from the run network %s)\n", c.Name, pool, net.Subnet)
			if err := p.lb(gctx, c, pool); err != nil {
				return err
			}
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: MetalLB pool %s ready in %.1fs\n", c.Name, pool, time.Since(start).Seconds())
			return nil
		})
	}
	return g.Wait()
}

func (p *Provider) installMetalLB(ctx context.Context, c *cluster.Cluster, pool netip.Prefix) error {
	manifest, err := MetalLBManifest(ctx)
	if err != nil {
		return err
	}
	return InstallMetalLB(ctx, c, manifest, pool, 3*time.Minute)
}
