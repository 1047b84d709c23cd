package env

import "github.com/ambientmc/ambientmc/framework/measure"

// Extension is an optional part of a run's lifecycle: CI's (framework/ci) plugs into Run at these
// named points, and the suites' profiles and metrics timeline reach it through the environment.
// Without one (Suite.CI nil) a run has none of them.
type Extension interface {
	// Instead runs before the environment exists and may run the tests elsewhere (a child run that
	// leaves junit.xml); done says it did, with the exit code.
	Instead() (code int, done bool)
	// QuietParent says this run is such a child of a go test run without -v: the person watching
	// still wants the terminal lines.
	QuietParent() bool
	// Check refuses bad input before anything starts.
	Check(e *Env) error
	// Started runs once the report directory and the report exist, before the clusters.
	Started(e *Env) error
	// Judge runs after the tests, before the report is written; it may fail the run.
	Judge(e *Env, code int) int
	// Finished runs after teardown.
	Finished(e *Env, code int)

	// RecordMetrics keeps every scrape of i (the report's metrics.csv).
	RecordMetrics(i Sampled)
	// Profile keeps i's heap and goroutine profiles, named for when, and returns their files.
	Profile(i Sampled, when string) []string
	// ProfileCPU starts a CPU profile of i; wait returns once it is kept.
	ProfileCPU(i Sampled, when string) (wait func())
	// ProfilesBearingOn names the kept profiles that bear on a report path.
	ProfilesBearingOn(path string) []string
}

// RecordMetrics keeps every scrape of i in the report's metrics.csv (with CI's extension).
func (e *Env) RecordMetrics(i Sampled) {
	if e.ext != nil {
		e.ext.RecordMetrics(i)
	}
}

// Profile keeps i's heap and goroutine profiles, named for when (e.g. "baseline",
// "after-join-cluster-3"), and returns their files relative to the report directory (with CI's
// extension).
func (e *Env) Profile(i Sampled, when string) []string {
	if e.ext == nil {
		return nil
	}
	return e.ext.Profile(i, when)
}

// ProfileCPU starts a CPU profile of i in the background; wait returns once it is kept.
func (e *Env) ProfileCPU(i Sampled, when string) (wait func()) {
	if e.ext == nil {
		return func() {}
	}
	return e.ext.ProfileCPU(i, when)
}

// ProfilesBearingOn names the kept profiles that bear on a report path (for failure messages).
func (e *Env) ProfilesBearingOn(path string) []string {
	if e.ext == nil {
		return nil
	}
	return e.ext.ProfilesBearingOn(path)
}

// Sampled is an istiod with its sampler (a mesh.Istiod).
type Sampled interface {
	Cluster() string
	Sampler() *measure.Sampler
}
