// Package ci is what a CI job adds to a run, as one optional part of its lifecycle
// (env.Extension): a verdict on the numbers (-gates, -baseline), junit.xml from plain go test,
// istiod's profiles, the metrics timeline and the component logs in $ARTIFACTS. Its parts are the
// packages under it.
package ci

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/ci/baseline"
	"github.com/ambientmc/ambientmc/framework/ci/gates"
	"github.com/ambientmc/ambientmc/framework/ci/junit"
	"github.com/ambientmc/ambientmc/framework/ci/profiles"
	"github.com/ambientmc/ambientmc/framework/ci/testrun"
	"github.com/ambientmc/ambientmc/framework/ci/timeline"
	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/bench"
)

// Flags are what a CI job adds to a run: a verdict on the numbers, junit.xml, profiles.
type Flags struct {
	Gates    string // -gates FILE
	Baseline string // -baseline DIR
	JUnit    bool
	Profiles bool
}

// ciFlags holds the values of the registered CI flags.
var ciFlags = registerCI(flag.CommandLine)

func registerCI(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Gates, "gates", "", "YAML file of bounds on report values by JSON path (see gates/); a broken bound fails the run")
	fs.StringVar(&f.Baseline, "baseline", "", "an earlier run's report directory (or bench.txt files) to judge the -gates file's baseline: bounds against, with benchstat's significance")
	fs.BoolVar(&f.JUnit, "junit", true, "write junit.xml (and test-output.txt, test-events.json) into the report directory; the test binary runs itself as a child through go tool test2json")
	fs.BoolVar(&f.Profiles, "profiles", true, "keep heap, goroutine and CPU profiles of the observed istiod in the report directory")
	return f
}

// LogsDir is where the run's component logs are copied inside $ARTIFACTS.
const LogsDir = "logs"

// Steps are CI's parts of one run (env.Extension).
type Steps struct {
	gates    *gates.File
	base     baseline.Samples
	profiles *profiles.Set
	timeline *timeline.Timeline
	e        *env.Env
}

var _ env.Extension = (*Steps)(nil)

// New is CI's part of a run, as the -gates, -baseline, -junit and -profiles flags ask.
func New() *Steps { return &Steps{} }

// Instead runs the tests in a child that writes junit.xml (testrun) unless this process is that
// child, -junit=false, or the binary only lists tests. done says the run happened there.
func (*Steps) Instead() (code int, done bool) {
	if testrun.IsChild() || !ciFlags.JUnit || env.FlagValue("test.list") != "" {
		return 0, false
	}
	dir, err := env.ReportDir(env.FlagValue("report-dir"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "ambientmc: report directory: %v\n", err)
		return 2, true
	}
	if dir, err = filepath.Abs(dir); err != nil {
		fmt.Fprintf(os.Stderr, "ambientmc: report directory: %v\n", err)
		return 2, true
	}
	if !testing.Verbose() {
		// The child runs verbose for test2json; the person who typed go test without -v still
		// wants the terminal lines (openTerminal).
		os.Setenv(quietParentEnv, "1")
	}
	// Later flags win: the child writes where junit.xml goes and frames its output for test2json.
	args := append(slices.Clone(os.Args[1:]), "-test.v=test2json", "-report-dir="+dir)
	return testrun.Run(testrun.Options{
		Package: testedPackage(), Dir: dir, Args: args, Verbose: env.FlagValue("test.v"),
		Stdout: os.Stdout, Stderr: os.Stderr,
		Extra: func() []junit.Case { return gateCases(dir) },
	}), true
}

// quietParentEnv tells a child run (Instead) that the go test its parent runs under was not
// verbose: the child itself always is.
const quietParentEnv = "AMBIENTMC_QUIET_PARENT"

// QuietParent says this run is a child whose parent go test ran without -v.
func (*Steps) QuietParent() bool { return testrun.IsChild() && os.Getenv(quietParentEnv) == "1" }

// testedPackage is the import path of the package this test binary tests.
func testedPackage() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return "tests"
}

// gateCases are the gates the child judged, read back from its report, as junit testcases.
func gateCases(dir string) []junit.Case {
	r, err := report.Read(filepath.Join(dir, report.JSONFile))
	if err != nil {
		return nil // no report: the child failed before its tests, which junit.xml shows
	}
	var out []junit.Case
	for _, g := range r.Gates {
		name := "TestGates/" + g.Path
		if g.Baseline != nil {
			name += "/" + g.Baseline.Benchmark
		}
		log := g.Message + "\nbound: " + g.Bound
		if g.Reason != "" {
			log += "\nreason: " + g.Reason
		}
		if len(g.Profiles) > 0 {
			log += "\nprofiles (in " + dir + "): " + strings.Join(g.Profiles, ", ")
		}
		out = append(out, junit.Case{Name: name, Failed: g.Verdict != report.GatePass, Message: g.Message, Log: log + "\n"})
	}
	return out
}

// Check reads -gates and -baseline before anything starts: a path the report schema lacks, a bad
// bound or a baseline that cannot be judged is one error naming the field and the fix.
func (c *Steps) Check(e *env.Env) error {
	if ciFlags.Gates == "" {
		if ciFlags.Baseline != "" {
			return fmt.Errorf("-baseline=%s needs -gates=FILE with a baseline: section saying which benchmarks may regress by how much (see gates/)", ciFlags.Baseline)
		}
		return nil
	}
	f, err := gates.Load(ciFlags.Gates)
	if err != nil {
		return err
	}
	c.gates = f
	switch {
	case ciFlags.Baseline == "" && len(f.Baseline) > 0:
		e.Logf("gates: %d bounds; its %d baseline bounds are judged only with -baseline=DIR", len(f.Bounds), len(f.Baseline))
		return nil
	case ciFlags.Baseline == "":
		return nil
	case len(f.Baseline) == 0:
		return fmt.Errorf("-baseline=%s: -gates=%s has no baseline: section; add one saying which benchmarks may regress by how much", ciFlags.Baseline, ciFlags.Gates)
	}
	if c.base, _, err = baseline.Read(ciFlags.Baseline); err != nil {
		return fmt.Errorf("-baseline=%s: %w", ciFlags.Baseline, err)
	}
	var errs []error
	for _, b := range f.Baseline {
		if err := baseline.Check(c.base, b, 1, f.Alpha); err != nil {
			errs = append(errs, fmt.Errorf("-baseline=%s with -gates=%s: %w", ciFlags.Baseline, ciFlags.Gates, err))
		}
	}
	return errors.Join(errs...)
}

// Started opens the metrics timeline and the profile set in the report directory.
func (c *Steps) Started(e *env.Env) error {
	c.e = e
	if err := os.MkdirAll(e.ReportDir, 0o755); err != nil {
		return err
	}
	e.Report.Artifacts = &report.Artifacts{Dir: os.Getenv(env.ArtifactsEnv), MetricsCSV: timeline.File}
	if e.Report.Artifacts.Dir != "" {
		e.Report.Artifacts.Logs = LogsDir
		e.Cleanup("copy component logs to $"+env.ArtifactsEnv, func() error { return copyLogsToArtifacts(e) })
	}
	if testrun.IsChild() {
		e.Report.Artifacts.JUnit, e.Report.Artifacts.TestOutput = testrun.JUnitFile, testrun.OutputFile
	}
	var err error
	if c.timeline, err = timeline.Open(filepath.Join(e.ReportDir, timeline.File)); err != nil {
		return err
	}
	e.Cleanup("close "+timeline.File, c.timeline.Close)
	c.profiles = profiles.New(e.ReportDir, ciFlags.Profiles)
	return nil
}

// RecordMetrics keeps every scrape of i in the report's metrics.csv.
func (c *Steps) RecordMetrics(i env.Sampled) {
	if c.timeline != nil {
		c.timeline.Follow(i.Cluster(), i.Sampler())
	}
}

// Profile keeps i's heap and goroutine profiles, named for when (e.g. "baseline",
// "after-join-cluster-3"), and returns their files relative to the report directory. A profile
// that cannot be had is a warning, not a failure.
func (c *Steps) Profile(i env.Sampled, when string) []string {
	if c.profiles == nil {
		return nil
	}
	files, err := c.profiles.Snapshot(context.Background(), i.Sampler(), i.Cluster(), when)
	if err != nil {
		c.e.Warn("profiles: " + err.Error())
	}
	return files
}

// ProfileCPU starts a 5 s CPU profile of i in the background (a join's convergence and settle fit
// in it; istiod idles after); wait returns once it is kept.
func (c *Steps) ProfileCPU(i env.Sampled, when string) (wait func()) {
	if c.profiles == nil {
		return func() {}
	}
	w := c.profiles.CPU(context.Background(), i.Sampler(), i.Cluster(), when, 5*time.Second)
	return func() {
		if err := w(); err != nil {
			c.e.Warn("profiles: " + err.Error())
		}
	}
}

// ProfilesBearingOn names the kept profiles that bear on a report path (for failure messages).
func (c *Steps) ProfilesBearingOn(path string) []string {
	if c.profiles == nil {
		return nil
	}
	return c.profiles.BearingOn(path)
}

// Judge judges every gate after the tests, prints one line each, puts them in the report and fails
// the run if one broke. It also records the profiles taken.
func (c *Steps) Judge(e *env.Env, code int) int {
	if e.Report == nil {
		return code
	}
	if c.profiles != nil {
		e.Report.Profiles = c.profiles.Taken()
	}
	if c.gates == nil {
		return code
	}
	js, err := report.JSON(e.Report)
	var gs []report.Gate
	if err == nil {
		gs, err = c.gates.Judge(js)
	}
	if err != nil {
		e.Logf("gates: %v", err)
		return max(code, 1)
	}
	if c.base != nil {
		cur := baseline.Samples{}
		if err := cur.ReadBench("this run", bench.Render(e.Report)); err != nil {
			e.Logf("gates: this run's bench lines: %v", err)
			return max(code, 1)
		}
		gs = append(gs, baseline.Judge(c.base, cur, c.gates.Baseline, c.gates.Alpha)...)
	}
	broken := 0
	for i := range gs {
		if gs[i].Verdict == report.GatePass {
			continue
		}
		broken++
		if ps := c.ProfilesBearingOn(gs[i].Path); len(ps) > 0 {
			gs[i].Profiles = ps
			gs[i].Message += "; profiles: " + strings.Join(ps, ", ")
		}
	}
	e.Report.Gates = gs
	for _, g := range gs {
		e.Logf("%s", g.Message)
	}
	e.Logf("gates (%s): %d of %d broken", ciFlags.Gates, broken, len(gs))
	if broken == 0 {
		return code
	}
	if code == 0 {
		// testing printed PASS; the final FAIL line makes test2json (and go test -json) agree.
		fmt.Println("FAIL")
	}
	return max(code, 1)
}
