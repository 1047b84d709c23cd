// Package env is a suite's lifecycle: flags -> topology -> provider -> clusters -> mesh steps ->
// tests -> report -> teardown. Everything a step starts registers its cleanup, which runs in
// reverse order on pass, failure, panic and Ctrl-C.
package env

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/report"
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
	terminal io.Writer // nil unless a person watches a run go test hides (openTerminal)
	mu       sync.Mutex
	cleanups []cleanup
	// tearingDown is held while the cleanups run (teardown).
	tearingDown sync.Mutex
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
	// parts runs the steps' per-cluster parts (Step.Each).
	parts *clusterParts
	// onReady is what clusterReady hands each ready cluster to (set before Create).
	onReady atomic.Pointer[func(*cluster.Cluster)]
	// ext is the suite's optional part of the lifecycle (CI's), nil without one.
	ext Extension
	// kept is what -keep left, once recorded (keep.go).
	kept *Kept
}

type cleanup struct {
	name string
	fn   func() error
}

// Step is one named setup step; its timing is recorded and printed.
type Step struct {
	Name string
	// Run is the step's work, or what it does once Each has run in every cluster.
	Run func(ctx context.Context, e *Env) error
	// Each, when set, is the step's work in one cluster, run in every cluster at once before Run
	// (the step bounds itself). Where the provider makes clusters ready a few at a time
	// (cluster.Facts.ReadyEarly), each cluster's part starts as soon as that cluster is ready: while
	// later clusters start and the steps before this one run. So it may use nothing of theirs, nor
	// Env's Clusters. A failed part stops the others and the setup.
	Each func(ctx context.Context, e *Env, c *cluster.Cluster) error
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
	io.WriteString(e.Log, e.line(format, args...))
}

// Suite is a test package as Run drives it: the setup steps it adds after the clusters, and its
// time plan.
type Suite struct {
	// Check validates the suite's own flags before anything starts.
	Check func() error
	// CI is the optional part CI adds to the run (framework/ci.New()); nil: none.
	CI    Extension
	Steps []Step
	// Plan works out, before anything starts, what the suite's steps and each of its top-level
	// tests will take (Run keeps the tests -run and -skip select). nil: only setup is planned.
	Plan func(PlanInput) (steps, tests []plan.Item)
	// Planned names every top-level test that needs the environment. A run whose -run and -skip
	// select none of them sets nothing up and runs the rest as plain tests (the suite's tests of
	// its own parts, such as its plan). nil: every run sets up.
	Planned []string
}

// selectsNone says -run and -skip select none of the planned tests.
func (s Suite) selectsNone() bool {
	if s.Planned == nil {
		return false
	}
	sel, err := plan.Select(FlagValue("test.run"), FlagValue("test.skip"))
	if err != nil {
		return false // setup's planning says so
	}
	for _, name := range s.Planned {
		if sel.Runs(name) {
			return false
		}
	}
	return true
}

// PlanInput is what a suite's plan is worked out from.
type PlanInput struct {
	Topology *topology.Topology
	Scale    workload.Scale
	Flags    Flags
	Provider string
	// DataPlane is what the provider declares carries traffic (report.DataPlane*): emulated
	// (processes on this host, the figures' reference), ztunnel (real clusters, slower to install
	// and join) or none (istiod only).
	DataPlane string
	// Istiods is how many istiods the run starts.
	Istiods int
}

// RunsIstiod says whether the suites start an istiod in cluster name: every primary, or with
// -mesh.istiods=observed only the observed one.
func (e *Env) RunsIstiod(name string) bool {
	obs, err := e.Observed()
	if e.Flags.Istiods == report.IstiodsObserved {
		return err == nil && obs.Name == name
	}
	for _, c := range e.Topology.Clusters {
		if c.Name == name {
			return c.IsPrimary()
		}
	}
	return false
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
