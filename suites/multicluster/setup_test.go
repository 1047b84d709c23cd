package multicluster

import (
	"context"
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

// observed is the cluster whose istiod the suites measure (-observe, else the first primary;
// the environment checked the flag before anything started).
func observed(e *env.Env) (*cluster.Cluster, error) {
	tc, err := e.Observed()
	if err != nil {
		return nil, err
	}
	return e.Cluster(tc.Name), nil
}

func installMesh(ctx context.Context, e *env.Env) error {
	scale = e.Scale
	var err error
	e.Report.Scale = &report.Scale{ServicesPerCluster: scale.Services, PodsPerCluster: scale.Pods}
	ambient, err = mesh.Install(ctx, e.Provider, e.Clusters)
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
	obs, err := observed(e)
	if err != nil {
		return err
	}
	e.Report.ControlPlane = nil
	return ambient.StartIstiods(ctx, mesh.Options{
		Dir: filepath.Join(e.RunDir, "istiod"),
		Log: e.Log,
		Istiods: func(c *cluster.Cluster) bool {
			return e.Flags.Istiods == "all" || c.Name == obs.Name
		},
	})
}
