// Package env is a suite's lifecycle: flags -> topology -> provider -> clusters -> mesh steps ->
// tests -> report -> teardown. Everything a step starts registers its cleanup, which runs in
// reverse order on pass, failure, panic and Ctrl-C.
package env

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/provider"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/render"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// Env is a running environment: the clusters of one topology and what was set up in them.
type Env struct {
	Topology  *topology.Topology
	Provider  cluster.Provider
	Clusters  []*cluster.Cluster
	RunDir    string // per-run working files; kept on failure and with -keep
	ReportDir string
	Report    *report.Report
	Log       io.Writer
	Flags     Flags
	// Scale is what every cluster gets loaded with (-scale, -services, -pods).
	Scale workload.Scale
	// Istiod is the pilot-discovery under test (-istiod.version, -istiod.binary); nil for
	// providers that run istiod images.
	Istiod *bins.IstiodBuild

	start    time.Time
	mu       sync.Mutex
	cleanups []cleanup
	// keepRunDir keeps component logs after a failure, for reading.
	keepRunDir bool
	// ready is set once setup finished and the tests may run.
	ready   bool
	cutOnce sync.Once
	// run is the run's context and the tests' clocks (deadline.go); plan is the run's time plan.
	run       *runState
	plan      *plan.Plan
	setupTook map[string]time.Duration
	// connWatch watches every socket of the run's processes (loopback.go).
	connWatch *proc.ConnWatch
	// peakMemory samples host memory in use over the whole run.
	peakMemory *measure.PeakMemory
	// crds is what installCRDs applies, loaded before the clusters are created.
	crds crds.Set
	// setupTimes are measured from the start of cluster creation (for the report's setup section).
	setupTimes struct{ created, apiServersReady, crdsEstablished time.Time }
	// ci holds the gates, profiles and metrics timeline (ci.go).
	ci *ciRun
}

type cleanup struct {
	name string
	fn   func() error
}

// Step is one named setup step; its timing is recorded and printed.
type Step struct {
	Name string
	Run  func(ctx context.Context, e *Env) error
}

// Cluster returns the cluster called name, or nil.
func (e *Env) Cluster(name string) *cluster.Cluster {
	for _, c := range e.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Cleanup registers fn to run at teardown, after everything registered later.
func (e *Env) Cleanup(name string, fn func() error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, cleanup{name, fn})
}

// Logf prints a progress line with the time since the run started.
func (e *Env) Logf(format string, args ...any) {
	fmt.Fprintf(e.Log, "ambientmc [%6.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// teardown runs the cleanups once, newest first, and reports the ones that failed.
func (e *Env) teardown() {
	e.mu.Lock()
	cs := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		if err := cs[i].fn(); err != nil {
			fmt.Fprintf(e.Log, "ambientmc: cleanup %s: %v\n", cs[i].name, err)
		}
	}
}

// Suite is a test package as Run drives it: the setup steps it adds after the clusters, and its
// time plan.
type Suite struct {
	// Check validates the suite's own flags before anything starts.
	Check func() error
	Steps []Step
	// Plan works out, before anything starts, what the suite's steps and each of its top-level
	// tests will take (Run keeps the tests -run and -skip select). nil: only setup is planned.
	Plan func(PlanInput) (steps, tests []plan.Item)
}

// PlanInput is what a suite's plan is worked out from.
type PlanInput struct {
	Topology *topology.Topology
	Scale    workload.Scale
	Flags    Flags
	Provider string
	// DataPlane is what the provider declares carries traffic: "emulated" (processes on this
	// host, the figures' reference) or "ztunnel" (real clusters, slower to install and join).
	DataPlane string
	// Istiods is how many istiods the run starts.
	Istiods int
}

// Run is a suite's TestMain body: it builds the environment from flags, plans the run against go
// test's -timeout, runs the steps, publishes the environment through out, runs the tests, writes
// the report and tears everything down. It returns the exit code. A run that would pass its
// deadline is cut short cleanly (see armDeadline): it never ends in go test's goroutine dump.
func Run(m *testing.M, out **Env, s Suite) (code int) {
	if !flag.Parsed() {
		// Providers registered after this package was initialised (a test's own) join the help.
		flag.Lookup("provider").Usage = provider.Usage()
		flag.Parse()
	}
	if code, done := runAsParent(); done { // CI hook (ci.go): junit.xml from a child run
		return code
	}
	e := &Env{Log: os.Stderr, Flags: *flags, start: time.Now(), peakMemory: measure.WatchPeakMemory(time.Second),
		run: newRunState(), setupTook: map[string]time.Duration{}}
	// Published before setup: the suite's steps reach the environment through it too.
	*out = e
	defer e.peakMemory.Stop()
	release := proc.TrapSignals(func(sig os.Signal) {
		e.cutRun(fmt.Sprintf("interrupted by %s", sig), e.plan)
		e.Logf("%s: stopping everything", sig)
		e.teardown()
		e.collectArtifacts(1) // CI hook (artifacts.go)
	})
	defer release()
	defer func() {
		if r := recover(); r != nil {
			e.cutShort(fmt.Sprintf("a panic: %v", r))
			e.teardown()
			panic(r)
		}
	}()
	if err := e.setup(e.run.ctx, s); err != nil {
		if cause := context.Cause(e.run.ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		e.Logf("setup failed: %v", err)
		e.keepLogs()
		e.teardown()
		e.collectArtifacts(1) // CI hook (artifacts.go)
		return e.checkLoopback(1)
	}
	e.setReady()
	testsDone := make(chan struct{})
	disarm := e.armDeadline(e.plan, time.Now(), testsDone)
	code = m.Run()
	close(testsDone)
	disarm()
	if context.Cause(e.run.ctx) != nil {
		code = 1
	}
	e.Report.Plan = e.planReport(e.plan)
	code = e.judgeGates(code) // CI hook (ci.go): gates after every test
	e.Logf("tests finished (exit code %d); run took %s", code, time.Since(e.start).Round(100*time.Millisecond))
	if err := e.writeReport(); err != nil {
		e.Logf("writing the report: %v", err)
		code = 1
	}
	if e.Flags.Keep {
		release()
		e.keep()
	}
	if code != 0 {
		e.keepLogs()
	}
	e.teardown()
	code = e.checkLoopback(code)
	e.collectArtifacts(code) // CI hook (artifacts.go)
	return code
}

// setReady marks setup done: from now on a cut-short run writes a partial report.
func (e *Env) setReady() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ready = true
}

// cutShort writes whatever the report holds so far with a warning saying why the run ended early,
// and keeps the run directory with its logs. It runs once.
func (e *Env) cutShort(why string) {
	e.cutOnce.Do(func() {
		e.mu.Lock()
		ready := e.ready
		e.keepRunDir = true
		e.mu.Unlock()
		if e.RunDir != "" {
			e.Logf("run cut short (%s): logs kept in %s", why, e.RunDir)
		}
		if !ready || e.Report == nil {
			return
		}
		e.Report.Warnings = append(e.Report.Warnings, "the run was cut short ("+why+"): this report holds only what was measured until then")
		e.Report.Plan = e.planReport(e.plan)
		if err := e.writeReport(); err != nil {
			e.Logf("writing the partial report: %v", err)
		}
	})
}

// removeRunDir deletes the run directory unless -keep or a failure asked to keep it.
func (e *Env) removeRunDir() error {
	e.mu.Lock()
	keep := e.Flags.Keep || e.keepRunDir
	e.mu.Unlock()
	if keep {
		return nil
	}
	return os.RemoveAll(e.RunDir)
}

// keepLogs keeps the run directory after a failure if anything wrote logs into it.
func (e *Env) keepLogs() {
	// Providers whose clusters keep their logs elsewhere (kind's node containers) copy them in.
	if lc, ok := e.Provider.(cluster.LogCollector); ok {
		lc.CollectLogs()
	}
	if entries, err := os.ReadDir(e.RunDir); err == nil && len(entries) > 0 {
		e.keepRunDir = true
		e.Logf("component logs kept in %s", e.RunDir)
	}
}

// checkInput validates every flag and the topology against the provider before anything starts,
// so bad input costs one clear error and no cluster.
func (e *Env) checkInput(s Suite) error {
	if err := e.Flags.validate(); err != nil {
		return err
	}
	if s.Check != nil {
		if err := s.Check(); err != nil {
			return err
		}
	}
	var err error
	if e.Scale, err = workload.Resolve(e.Flags.Scale, e.Flags.Services, e.Flags.Pods); err != nil {
		return err
	}
	if e.Flags.Topology != "" {
		e.Topology, err = topology.Load(e.Flags.Topology)
	} else {
		k := e.Flags.Networks
		if k == 0 {
			k = e.Flags.Clusters
		}
		e.Topology, err = topology.GenerateNetworks(e.Flags.Clusters, k)
	}
	if err != nil {
		return err
	}
	if _, err := e.Observed(); err != nil {
		return err
	}
	// The provider checks its own flags; building it starts nothing.
	p, err := provider.New(e.Flags.Provider, e.providerEnv(""))
	if err != nil {
		return err
	}
	if err := e.Flags.Istiod.validateFor(p); err != nil {
		return err
	}
	return provider.CheckTopology(e.Flags.Provider, e.Topology)
}

// providerEnv is what the provider gets from the environment, writing into runDir.
func (e *Env) providerEnv(runDir string) provider.Env {
	istiods := 0 // one per primary
	if e.Flags.Istiods == "observed" {
		istiods = 1
	}
	return provider.Env{RunDir: runDir, Log: e.Log, Istiods: istiods, PodsPerCluster: e.Scale.Pods,
		Keep: e.Flags.Keep, Deadline: providerDeadline()}
}

// Observed is the cluster whose istiod the suites measure: -observe, else the first primary.
func (e *Env) Observed() (topology.Cluster, error) {
	for _, c := range e.Topology.Clusters {
		if e.Flags.Observe == "" && c.IsPrimary() || c.Name == e.Flags.Observe && e.Flags.Observe != "" {
			if !c.IsPrimary() {
				return c, fmt.Errorf("-observe=%s: not a primary, so it runs no istiod; name a primary cluster", e.Flags.Observe)
			}
			return c, nil
		}
	}
	if e.Flags.Observe != "" {
		return topology.Cluster{}, fmt.Errorf("-observe=%s: no such cluster in the topology; name one of its primaries", e.Flags.Observe)
	}
	return topology.Cluster{}, fmt.Errorf("the topology has no primary cluster: mark at least one cluster primary")
}

func (e *Env) setup(ctx context.Context, suite Suite) error {
	if err := e.checkInput(suite); err != nil {
		return err
	}
	if err := e.loadGates(); err != nil { // CI hook (ci.go): -gates, -baseline before anything starts
		return err
	}
	if err := CheckIstiod(ctx, e.Flags.Istiod); err != nil {
		return err
	}
	var err error
	if e.RunDir, err = os.MkdirTemp("", "ambientmc-run-"); err != nil {
		return err
	}
	e.Cleanup("remove run directory", e.removeRunDir)
	if e.Provider, err = provider.New(e.Flags.Provider, e.providerEnv(filepath.Join(e.RunDir, "clusters"))); err != nil {
		return err
	}
	if e.ReportDir, err = reportDir(e.Flags.ReportDir); err != nil { // -report-dir, $ARTIFACTS, or a new one
		return err
	}
	if err := e.planRun(suite); err != nil {
		return err
	}
	e.watchLoopback()
	// Setup counts against go test's kill, a minute after -timeout from the process start.
	setupDone := make(chan struct{})
	defer close(setupDone)
	defer e.armDeadline(e.plan, time.Time{}, setupDone)()
	e.Report = newReport(e.Provider, e.Topology)
	e.Report.Warnings = append(e.Report.Warnings, e.plan.Warnings...)
	if err := e.startCI(); err != nil { // CI hook (ci.go): metrics.csv, profiles
		return err
	}
	if ni, ok := e.Provider.(cluster.NodeImager); ok {
		e.Report.NodeImage = ni.NodeImage()
	}
	all := append([]Step{
		{"preflight", func(ctx context.Context, e *Env) error { return e.Provider.Preflight(ctx, e.Topology) }},
		{"istiod-binary", resolveIstiod},
		{"clusters", createClusters},
		{"crds", installCRDs},
	}, suite.Steps...)
	for _, s := range all {
		start := time.Now()
		e.Logf("%s: starting", s.Name)
		err := s.Run(ctx, e)
		e.setupTook[s.Name] = time.Since(start)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		e.Logf("%s: done in %s", s.Name, time.Since(start).Round(10*time.Millisecond))
	}
	if il, ok := e.Provider.(cluster.ImageLister); ok {
		imgs, err := il.Images(ctx)
		if err != nil {
			e.Logf("reading the Istio images the clusters run: %v", err)
		}
		for _, im := range imgs {
			e.Report.IstioImages = append(e.Report.IstioImages, report.IstioImage{Cluster: im.Cluster, Component: im.Component, Image: im.Image, ImageID: im.ImageID})
		}
	}
	e.Report.Setup = setupReport(ctx, e, time.Since(e.start))
	e.Logf("environment ready: %d clusters in %s", len(e.Clusters), time.Since(e.start).Round(100*time.Millisecond))
	return nil
}

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
	if pl, ok := e.Provider.(cluster.CRDPreloader); ok {
		if e.crds, err = pl.PreloadCRDs(e.crds); err != nil {
			return err
		}
	}
	e.Cleanup("destroy clusters", func() error { return e.Provider.Destroy(context.Background()) })
	e.setupTimes.created = time.Now()
	cs, err := e.Provider.Create(ctx, e.Topology)
	e.setupTimes.apiServersReady = time.Now()
	if err != nil {
		return fmt.Errorf("%w (component logs under %s)", err, e.Provider.LogDir())
	}
	e.Clusters = cs
	if len(cs) > 0 {
		e.Report.Kubernetes = cs[0].KubernetesVersion
	}
	return nil
}

// installCRDs applies the Istio and Gateway API CRDs in every cluster in parallel (checking those
// a provider stored before its API servers started), waits until all are Established and served,
// and labels istio-system with the cluster's network.
func installCRDs(ctx context.Context, e *Env) error {
	set := e.crds
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range e.Clusters {
		g.Go(func() error {
			if err := crds.Apply(gctx, c.Dynamic, set); err != nil {
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
	if pl, ok := e.Provider.(cluster.CRDPreloader); ok && len(e.Clusters) > 0 {
		if pl.SeededCRDs() {
			how = "stored from the seed before the API servers started"
		} else if err := pl.SaveCRDSeed(ctx, e.Clusters[0]); err != nil {
			e.Logf("crds: saving the CRD seed for later runs: %v", err)
		}
	}
	e.Logf("crds: %d CRDs established and served in each of %d clusters (%s)", len(set), len(e.Clusters), how)
	return nil
}

func (e *Env) writeReport() error {
	if err := os.MkdirAll(e.ReportDir, 0o755); err != nil {
		return err
	}
	if e.peakMemory != nil && e.Report.Setup != nil {
		if peak := e.peakMemory.Peak(); peak > 0 {
			e.Report.Setup.PeakHostMemoryBytes = report.F(float64(peak))
		}
	}
	var self syscall.Rusage
	if e.Report.Setup != nil && syscall.Getrusage(syscall.RUSAGE_SELF, &self) == nil && self.Maxrss > 0 {
		e.Report.Setup.TestProcessPeakRSSBytes = report.F(float64(self.Maxrss) * 1024) // Linux reports KiB
	}
	if err := render.Write(e.ReportDir, e.Report); err != nil {
		return err
	}
	e.Logf("report written to %s", e.ReportDir)
	return nil
}

// keep prints how to reach every cluster and blocks until Ctrl-C.
func (e *Env) keep() {
	fmt.Fprintf(os.Stderr, "\nambientmc: -keep: %d clusters stay up until Ctrl-C (run directory %s)\n", len(e.Clusters), e.RunDir)
	for _, c := range e.Clusters {
		fmt.Fprintf(os.Stderr, "  %-12s kubectl --kubeconfig=%s get namespaces\n", c.Name, c.Kubeconfig)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "ambientmc: stopping")
	e.Flags.Keep = false // let the run directory go now
}
