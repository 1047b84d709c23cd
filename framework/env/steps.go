package env

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

func createClusters(ctx context.Context, e *Env) error {
	root, err := bins.SourceRoot()
	if err != nil {
		return err
	}
	istioSrc := "" // the embedded CRDs of the pinned istio.io/istio
	if e.Istiod != nil {
		istioSrc = e.Istiod.SourceDir // the istiod under test's own CRDs
	}
	if e.crds, err = crds.LoadFrom(ctx, root, istioSrc); err != nil {
		return err
	}
	if pl, ok := e.Provider.(cluster.Snapshots); ok {
		if e.crds, err = pl.PreloadCRDs(e.crds); err != nil {
			return err
		}
	}
	if wr, ok := e.Provider.(cluster.Snapshots); ok && e.Scale.Pods > 0 {
		set, err := workload.SnapshotSet(e.Scale, root)
		if err != nil {
			return err
		}
		if err := wr.PreloadWorkloads(set); err != nil {
			return err
		}
	}
	e.Cleanup("destroy clusters", func() error { return e.Provider.Destroy(context.Background()) })
	if e.Flags.Keep {
		e.Cleanup("record the kept clusters", e.recordKeptAtTeardown)
	}
	createCtx := e.parts.startEarly(e)
	e.setupTimes.created = time.Now()
	cs, err := e.Provider.Create(createCtx, e.Topology)
	e.setupTimes.apiServersReady = time.Now()
	if perr := e.parts.failed(); perr != nil && ctx.Err() == nil {
		return perr // what stopped Create (not the run's own end: a timeout, Ctrl-C)
	}
	if err != nil {
		return fmt.Errorf("%w (component logs under %s)", err, e.Provider.LogDir())
	}
	e.Clusters = cs
	if len(cs) > 0 {
		e.Report.Kubernetes = cs[0].KubernetesVersion
	}
	return nil
}

// installCRDs applies the Istio and Gateway API CRDs in every cluster (served only where an istiod
// reads them, crdsFor), checking those a provider stored before its API servers started; waits
// until all are Established and the served ones served, and labels istio-system with the
// cluster's network.
func installCRDs(ctx context.Context, e *Env) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(crdParallelism(e.Provider))
	// The first cluster of each kind, whole and watched-only, for the provider's seeds.
	var seedFrom []*cluster.Cluster
	kinds := map[bool]bool{}
	for _, c := range e.Clusters {
		if light := e.WatchedOnly(c.Name); !kinds[light] {
			kinds[light] = true
			seedFrom = append(seedFrom, c)
		}
		g.Go(func() error {
			if err := crds.Apply(gctx, c.Dynamic, e.crdsFor(c.Name)); err != nil {
				return fmt.Errorf("cluster %s: %w", c.Name, err)
			}
			return mesh.EnsureSystemNamespace(gctx, c)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	e.setupTimes.crdsEstablished = time.Now()
	how := "created through the API"
	if pl, ok := e.Provider.(cluster.Snapshots); ok {
		if pl.SeededCRDs() {
			how = "stored from the seed before the API servers started"
		}
		for _, c := range seedFrom { // each a no-op where that kind's seed was used
			if err := pl.SaveCRDSeed(ctx, c); err != nil {
				e.Logf("crds: saving the CRD seed for later runs: %v", err)
			}
		}
	}
	if w := watchedOnlySetup(e); w != nil {
		e.Logf("crds: %d CRDs established and served where the istiod runs; in the %d clusters it only watches established, %d of them served (%s)",
			len(e.crds), w.Clusters, len(crds.ServedWhereNoIstiod()), how)
		return nil
	}
	e.Logf("crds: %d CRDs established and served in each of %d clusters (%s)", len(e.crds), len(e.Clusters), how)
	return nil
}

// crdsFor is the CRDs cluster name gets: in a cluster the run's only istiod merely watches
// (WatchedOnly) and the provider builds lighter (Facts.WatchedOnlyCuts), served only those an
// istiod reads from a cluster it does not run in; elsewhere all served (never changing a CRD an
// existing cluster serves).
func (e *Env) crdsFor(name string) crds.Set {
	if e.Provider.Facts().WatchedOnlyCuts != nil && e.WatchedOnly(name) {
		return e.crds.WhereNoIstiod()
	}
	return e.crds
}

// WatchedOnly says cluster name runs no istiod in a run that starts only the observed one
// (-mesh.istiods=observed): nothing there is read but what that istiod watches, so the cluster
// may be built lighter (provider.Env.IstiodClusters). Other runs keep every cluster whole.
func (e *Env) WatchedOnly(name string) bool {
	return e.Flags.Istiods == report.IstiodsObserved && !e.RunsIstiod(name)
}

// crdParallelism bounds how many clusters get their CRDs at once. Creating them through the API
// writes about a hundred large objects per cluster: 50 local clusters at once, all on one etcd,
// had etcd time out a request ("etcdserver: request timed out") after 224 s. Checking CRDs a
// seed stored is reads only.
func crdParallelism(p cluster.Provider) int {
	if pl, ok := p.(cluster.Snapshots); ok && pl.SeededCRDs() {
		return 16
	}
	return max(2, runtime.NumCPU())
}
