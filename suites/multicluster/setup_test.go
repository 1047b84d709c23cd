package multicluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// observed is the cluster whose istiod the suites measure (-observe, else the first primary;
// the environment checked the flag before anything started).
func (s *suite) observed() *cluster.Cluster {
	tc, err := s.Observed()
	if err != nil {
		panic(err) // checked before anything started
	}
	return s.Cluster(tc.Name)
}

func installMesh(ctx context.Context, e *env.Env) error {
	mc.scale = e.Scale
	e.Report.Scale = &report.Scale{ServicesPerCluster: mc.scale.Services, PodsPerCluster: mc.scale.Pods}
	m, err := mesh.Install(ctx, e.Provider, e.Clusters)
	if err != nil {
		return err
	}
	mc.mesh = m
	e.Cleanup("stop istiods", func() error { m.Stop(); return nil })
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
	setup := &report.Setup{}
	inFlight := workload.DefaultInFlight
	at := workloadClustersAtOnce(len(e.Clusters))
	e.Logf("workloads: %d clusters at a time, %d API requests in flight in each", at, inFlight)
	cpuBefore, start := processCPU(), time.Now()
	// The EndpointSlice waits hold no slot: the next cluster's pods go out meanwhile. A failed
	// deployment stops them too (cancel), as a failed wait stops the deployments (wctx).
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waits, wctx := errgroup.WithContext(wctx)
	g, gctx := errgroup.WithContext(wctx)
	g.SetLimit(at)
	done := func(cs report.ClusterSetup) {
		mu.Lock()
		setup.Clusters = append(setup.Clusters, cs)
		mu.Unlock()
	}
	restorer, _ := e.Provider.(cluster.WorkloadRestorer)
	var written atomic.Int64
	for _, c := range e.Clusters {
		g.Go(func() error {
			cs, restored, err := loadWorkloads(gctx, e, c, restorer, progress, inFlight)
			if err != nil {
				return err
			}
			if !restored {
				written.Add(int64(mc.scale.Pods))
			}
			// A snapshot is kept only of a cluster whose every pod the controller published.
			save := func() {
				if restorer == nil || restored {
					return
				}
				if err := restorer.SaveWorkloads(wctx, c); err != nil {
					e.Logf("workloads: %s: keeping them for later runs failed (the next run writes them again): %v", c.Name, err)
				}
			}
			if !c.Runs.Controllers {
				save()
				done(cs)
				return nil
			}
			// istiod reads EndpointSlices of every cluster: measure it only once they are all there.
			waits.Go(func() error {
				start := time.Now()
				pub, err := workload.WaitEndpointSlices(wctx, c, mc.scale, endpointSlicesWait)
				if err != nil {
					return err
				}
				cs.EndpointSlices, cs.Endpoints = &pub.Slices, &pub.Endpoints
				e.Logf("workloads: %s: %d EndpointSlices hold the %d endpoints (%.1fs after the pods)", c.Name, pub.Slices, pub.Endpoints, time.Since(start).Seconds())
				save()
				done(cs)
				return nil
			})
			return nil
		})
	}
	err := g.Wait()
	if err != nil {
		cancel()
	}
	if werr := waits.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	w := &report.WorkloadSetup{Seconds: elapsed.Seconds()}
	if n := written.Load(); n > 0 {
		w.PodsPerSecond = report.F(float64(n) / elapsed.Seconds())
	}
	for _, cs := range setup.Clusters {
		if cs.RestoredFrom != "" {
			w.RestoredClusters++
		}
	}
	if cpu := processCPU() - cpuBefore; cpu >= 0 {
		w.TestProcessCPUCores = report.F(cpu.Seconds() / elapsed.Seconds())
	}
	for _, c := range e.Clusters {
		n, d := c.ClientWaits.Waited()
		w.ClientWaits += n
		w.ClientWaitSeconds += d.Seconds()
	}
	setup.Workloads = w
	e.Report.Setup = setup
	if w.PodsPerSecond == nil {
		e.Logf("workloads: restored in all %d clusters; test process %.2f cores", len(e.Clusters), deref(w.TestProcessCPUCores))
		return nil
	}
	e.Logf("workloads: %.0f pods/s over the %d clusters that wrote them (%d restored); client rate limiter waited %d times; test process %.2f cores",
		*w.PodsPerSecond, len(e.Clusters)-w.RestoredClusters, w.RestoredClusters, w.ClientWaits, deref(w.TestProcessCPUCores))
	return nil
}

// loadWorkloads gives c its scale workloads: checked where the provider restored them before the
// API server started, else written through the API.
func loadWorkloads(ctx context.Context, e *env.Env, c *cluster.Cluster, restorer cluster.WorkloadRestorer, progress workload.Progress, inFlight int) (report.ClusterSetup, bool, error) {
	if restorer != nil {
		if from, ok := restorer.RestoredWorkloads(c.Name); ok {
			d, err := workload.CheckRestored(ctx, c, mc.scale)
			if err != nil {
				return report.ClusterSetup{}, true, fmt.Errorf("%w (restored from %s)", err, from)
			}
			e.Logf("workloads: %s: %d services, %d pods restored from %s, checked in %.1fs", c.Name, len(d.Services), d.Pods, from, d.Elapsed.Seconds())
			return report.ClusterSetup{Name: c.Name, RestoredFrom: from}, true, nil
		}
	}
	d, err := workload.Deploy(ctx, c, mc.scale, progress, workload.WithInFlight(inFlight))
	if err != nil {
		return report.ClusterSetup{}, false, err
	}
	e.Logf("workloads: %s: %d services, %d pods in %.1fs (%.0f pods/s)", c.Name, len(d.Services), d.Pods, d.Elapsed.Seconds(), d.PodsPerSecond)
	return report.ClusterSetup{Name: c.Name, PodsPerSecond: report.F(d.PodsPerSecond)}, false, nil
}

// endpointSlicesWait bounds how long the EndpointSlice controller may take to publish a cluster's
// scale pods after they were created (at its default 20 writes/s, a few seconds per 100 services).
const endpointSlicesWait = 5 * time.Minute

// workloadClustersAtOnce is how many clusters get their workloads at the same time, each with
// workload.DefaultInFlight requests in flight: each pod wakes its cluster's API server,
// controller-manager and the shared etcd, and with every cluster at once those processes crowd the
// cores. Measured at 50 clusters with controller-managers, all at once (6 requests in flight each):
// 22 pods/s over all clusters, the load average near 70; at 10 clusters all at once, 85 pods/s.
// (50 clusters at 32 requests each, 1600 at once, had starved the shared etcd until it answered
// "etcdserver: request timed out".)
func workloadClustersAtOnce(clusters int) int {
	return min(max(clusters, 1), 4)
}

// processCPU is the test process's own CPU time so far (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startIstiods(ctx context.Context, e *env.Env) error {
	err := mc.mesh.StartIstiods(ctx, mesh.Options{
		IstiodBinary: e.IstiodPath(), // -istiod.version / -istiod.binary, resolved before any cluster started
		Dir:          filepath.Join(e.RunDir, "istiod"),
		Log:          e.Log,
		Istiods:      func(c *cluster.Cluster) bool { return e.RunsIstiod(c.Name) },
	})
	for _, i := range mc.mesh.Istiods {
		e.RecordMetrics(i) // every scrape into the report's metrics.csv
	}
	return err
}
