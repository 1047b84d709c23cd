package experiment

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
	"github.com/ambientmc/ambientmc/framework/proxies"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

func (r *Run) installMesh(ctx context.Context, e *env.Env) error {
	e.Report.Scale = &report.Scale{ServicesPerCluster: e.Scale.Services, PodsPerCluster: e.Scale.Pods}
	m, err := mesh.Install(ctx, e.Provider, e.Clusters)
	if err != nil {
		return err
	}
	r.Mesh = m
	e.Cleanup("stop istiods", func() error { m.Stop(); return nil })
	return nil
}

// workloads gives every cluster its scale workloads (written, or restored by the provider and
// checked) and reports how fast. A cluster's part starts as soon as it is ready where the provider
// starts clusters a few at a time (env.Step.Each), so a hundred clusters' workloads are written
// while later clusters start.
type workloads struct {
	once     sync.Once
	slots    chan struct{} // one per cluster loading at once (workloadClustersAtOnce)
	restorer cluster.Snapshots
	written  atomic.Int64

	mu         sync.Mutex
	start, end time.Time
	cpuBefore  time.Duration
	clusters   map[string]report.ClusterSetup
	lastLine   map[string]time.Time // progress lines, per cluster
}

// begin is the first part's: every part shares the slots.
func (w *workloads) begin(e *env.Env) {
	w.once.Do(func() {
		at := workloadClustersAtOnce(len(e.Topology.Clusters))
		w.slots = make(chan struct{}, at)
		w.restorer, _ = e.Provider.(cluster.Snapshots)
		w.clusters, w.lastLine = map[string]report.ClusterSetup{}, map[string]time.Time{}
		w.cpuBefore, w.start = processCPU(), time.Now()
		e.Logf("workloads: %d clusters at a time, %d API requests in flight in each", at, workload.DefaultInFlight)
	})
}

func (w *workloads) progress(e *env.Env) workload.Progress {
	return func(c string, done, total int) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if done == total || time.Since(w.lastLine[c]) > 5*time.Second {
			w.lastLine[c] = time.Now()
			e.Logf("workloads: %s: %d/%d pods", c, done, total)
		}
	}
}

// each loads c holding a slot, then waits for its EndpointSlices without one (the next cluster's
// pods go out meanwhile), and keeps a snapshot of what it wrote.
func (w *workloads) each(ctx context.Context, e *env.Env, c *cluster.Cluster) error {
	w.begin(e)
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("cluster %s: %w", c.Name, ctx.Err())
	}
	cs, restored, err := loadWorkloads(ctx, e, c, w.restorer, w.progress(e), workload.DefaultInFlight)
	<-w.slots
	if err != nil {
		return err
	}
	if !restored {
		w.written.Add(int64(e.Scale.Pods))
	}
	// istiod reads EndpointSlices of every cluster: measure it only once they are all there.
	if c.Runs.Controllers {
		start := time.Now()
		pub, err := workload.WaitEndpointSlices(ctx, c, e.Scale, endpointSlicesWait)
		if err != nil {
			return err
		}
		cs.EndpointSlices, cs.Endpoints = &pub.Slices, &pub.Endpoints
		e.Logf("workloads: %s: %d EndpointSlices hold the %d endpoints (%.1fs after the pods)", c.Name, pub.Slices, pub.Endpoints, time.Since(start).Seconds())
	}
	// A snapshot is kept only of a cluster whose every pod the controller published.
	if w.restorer != nil && !restored {
		if err := w.restorer.SaveWorkloads(ctx, c); err != nil {
			e.Logf("workloads: %s: keeping them for later runs failed (the next run writes them again): %v", c.Name, err)
		}
	}
	w.mu.Lock()
	w.clusters[c.Name], w.end = cs, time.Now()
	w.mu.Unlock()
	return nil
}

// report sets the setup section's workloads once every cluster's part is done.
func (w *workloads) report(_ context.Context, e *env.Env) error {
	w.begin(e) // a run of no clusters
	w.mu.Lock()
	defer w.mu.Unlock()
	setup := &report.Setup{}
	for _, c := range e.Clusters {
		if cs, ok := w.clusters[c.Name]; ok {
			setup.Clusters = append(setup.Clusters, cs)
		}
	}
	elapsed := w.end.Sub(w.start)
	wr := &report.WorkloadSetup{Seconds: elapsed.Seconds()}
	if n := w.written.Load(); n > 0 && elapsed > 0 {
		wr.PodsPerSecond = report.F(float64(n) / elapsed.Seconds())
	}
	for _, cs := range setup.Clusters {
		if cs.RestoredFrom != "" {
			wr.RestoredClusters++
		}
	}
	// Over the whole step: where the parts started early, the clusters' start and the steps between too.
	if cpu := processCPU() - w.cpuBefore; cpu >= 0 {
		wr.TestProcessCPUCores = report.F(cpu.Seconds() / time.Since(w.start).Seconds())
	}
	for _, c := range e.Clusters {
		n, d := c.ClientWaits.Waited()
		wr.ClientWaits += n
		wr.ClientWaitSeconds += d.Seconds()
	}
	setup.Workloads = wr
	e.Report.Setup = setup
	if wr.PodsPerSecond == nil {
		e.Logf("workloads: restored in all %d clusters; test process %.2f cores", len(e.Clusters), deref(wr.TestProcessCPUCores))
		return nil
	}
	e.Logf("workloads: %.0f pods/s over the %d clusters that wrote them (%d restored) in %.1fs; client rate limiter waited %d times; test process %.2f cores",
		*wr.PodsPerSecond, len(e.Clusters)-wr.RestoredClusters, wr.RestoredClusters, elapsed.Seconds(), wr.ClientWaits, deref(wr.TestProcessCPUCores))
	return nil
}

// loadWorkloads gives c its scale workloads: checked where the provider restored them before the
// API server started, else written through the API.
func loadWorkloads(ctx context.Context, e *env.Env, c *cluster.Cluster, restorer cluster.Snapshots, progress workload.Progress, inFlight int) (report.ClusterSetup, bool, error) {
	if restorer != nil {
		if from, ok := restorer.RestoredWorkloads(c.Name); ok {
			d, err := workload.CheckRestored(ctx, c, e.Scale)
			if err != nil {
				return report.ClusterSetup{}, true, fmt.Errorf("%w (restored from %s)", err, from)
			}
			e.Logf("workloads: %s: %d services, %d pods restored from %s, checked in %.1fs", c.Name, len(d.Services), d.Pods, from, d.Elapsed.Seconds())
			return report.ClusterSetup{Name: c.Name, RestoredFrom: from}, true, nil
		}
	}
	d, err := workload.Deploy(ctx, c, e.Scale, progress, workload.WithInFlight(inFlight))
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

func (r *Run) startIstiods(ctx context.Context, e *env.Env) error {
	err := r.Mesh.StartIstiods(ctx, mesh.Options{
		IstiodBinary: e.IstiodPath(), // -istiod.version / -istiod.binary, resolved before any cluster started
		Dir:          filepath.Join(e.RunDir, "istiod"),
		Log:          e.Log,
		Istiods:      func(c *cluster.Cluster) bool { return e.RunsIstiod(c.Name) },
	})
	for _, i := range r.Mesh.Istiods {
		e.RecordMetrics(i) // every scrape into the report's metrics.csv
	}
	if err != nil {
		return err
	}
	return r.startProxies(ctx, e)
}

// startProxies gives every istiod the Envoy clients a real mesh gives it: its east-west gateway's
// and, with -waypoints, its cluster's waypoints' (deployed in every cluster). Where the pods run
// Istio's own proxies (images with Envoy: dataPlane ztunnel) those are the clients, and the
// framework connects none of its own.
func (r *Run) startProxies(ctx context.Context, e *env.Env) error {
	connect := e.Provider.Facts().DataPlane != report.DataPlaneZtunnel
	r.Proxies = proxies.New(r.Mesh, e.Provider.Gateways(), filepath.Join(e.RunDir, "proxies"))
	e.Cleanup("stop the gateways' and waypoints' proxy clients", func() error { r.Proxies.Close(); return nil })
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range e.Clusters {
		hasIstiod := r.Mesh.Istiods[c.Name] != nil
		g.Go(func() error {
			if connect && hasIstiod {
				if err := r.Proxies.ConnectEastWest(gctx, c); err != nil {
					return err
				}
			}
			if !r.Opts.Waypoints {
				return nil
			}
			for k := range e.Scale.Namespaces {
				if err := r.Proxies.DeployWaypoint(gctx, c, workload.NamespaceName(k), connect && hasIstiod); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	what := "east-west gateways' Envoy clients"
	if r.Opts.Waypoints {
		what += fmt.Sprintf(" and %d waypoints per cluster", e.Scale.Namespaces)
	}
	if !connect {
		what += " (Istio's own proxies are the clients)"
	}
	e.Logf("proxies: %s in %.1fs", what, time.Since(start).Seconds())
	return nil
}
