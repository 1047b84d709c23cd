package multicluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

var (
	// ambient is the mesh installed across mc's clusters.
	ambient *mesh.Mesh
	// scale is what every cluster was loaded with.
	scale workload.Scale
)

// observed is the cluster whose istiod the join suite measures: -observe, else the first primary.
func observed(e *env.Env) (*cluster.Cluster, error) {
	if e.Flags.Observe != "" {
		c := e.Cluster(e.Flags.Observe)
		if c == nil {
			return nil, fmt.Errorf("-observe=%s: no such cluster in the topology", e.Flags.Observe)
		}
		if !c.IsPrimary() {
			return nil, fmt.Errorf("-observe=%s: not a primary, so it runs no istiod", e.Flags.Observe)
		}
		return c, nil
	}
	for _, c := range e.Clusters {
		if c.IsPrimary() {
			return c, nil
		}
	}
	return nil, fmt.Errorf("the topology has no primary cluster")
}

func installMesh(ctx context.Context, e *env.Env) error {
	if _, err := observed(e); err != nil {
		return err
	}
	var err error
	scale, err = workload.Resolve(e.Flags.Scale, e.Flags.Services, e.Flags.Pods)
	if err != nil {
		return err
	}
	e.Report.Scale = &report.Scale{ServicesPerCluster: scale.Services, PodsPerCluster: scale.Pods}
	ambient, err = mesh.Install(ctx, e.Clusters)
	if err != nil {
		return err
	}
	e.Cleanup("stop istiods", func() error { ambient.Stop(); return nil })
	return nil
}

func deployWorkloads(ctx context.Context, e *env.Env) error {
	var mu sync.Mutex
	last := map[string]time.Time{}
	progress := func(c string, done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if done == total || time.Since(last[c]) > 5*time.Second {
			last[c] = time.Now()
			e.Logf("workloads: %s: %d/%d pods", c, done, total)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range e.Clusters {
		g.Go(func() error {
			d, err := workload.Deploy(gctx, c, scale, progress)
			if err != nil {
				return err
			}
			e.Logf("workloads: %s: %d services, %d pods in %.1fs (%.0f pods/s)", c.Name, len(d.Services), d.Pods, d.Elapsed.Seconds(), d.PodsPerSecond)
			return nil
		})
	}
	return g.Wait()
}

func startIstiods(ctx context.Context, e *env.Env) error {
	// -istiod.version / -istiod.binary, resolved (and built) by the env before any cluster started.
	bin := e.Istiod.Path
	obs, err := observed(e)
	if err != nil {
		return err
	}
	e.Report.ControlPlane = nil
	return ambient.StartIstiods(ctx, mesh.Options{
		IstiodBinary: bin,
		Dir:          filepath.Join(e.RunDir, "istiod"),
		Log:          e.Log,
		Istiods: func(c *cluster.Cluster) bool {
			return e.Flags.Istiods == "all" || c.Name == obs.Name
		},
	})
}
