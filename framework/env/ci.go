package env

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
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/ci/profiles"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/bench"
	"github.com/ambientmc/ambientmc/framework/ci/testrun"
	"github.com/ambientmc/ambientmc/framework/ci/timeline"
)

// CIFlags are what a CI job adds to a run: a verdict on the numbers, junit.xml, profiles.
type CIFlags struct {
	Gates    string // -gates FILE
	Baseline string // -baseline DIR
	JUnit    bool
	Profiles bool
}

// ciFlags holds the values of the registered CI flags.
var ciFlags = registerCI(flag.CommandLine)

func registerCI(fs *flag.FlagSet) *CIFlags {
	f := &CIFlags{}
	fs.StringVar(&f.Gates, "gates", "", "YAML file of bounds on report values by JSON path (see gates/); a broken bound fails the run")
	fs.StringVar(&f.Baseline, "baseline", "", "an earlier run's report directory (or bench.txt files) to judge the -gates file's baseline: bounds against, with benchstat's significance")
	fs.BoolVar(&f.JUnit, "junit", true, "write junit.xml (and test-output.txt, test-events.json) into the report directory; the test binary runs itself as a child through go tool test2json")
	fs.BoolVar(&f.Profiles, "profiles", true, "keep heap, goroutine and CPU profiles of the observed istiod in the report directory")
	return f
}

// ArtifactsEnv is prow's convention for where a job's files go.
const ArtifactsEnv = "ARTIFACTS"

// LogsDir is where the run's component logs are copied inside $ARTIFACTS.
const LogsDir = "logs"

// ciRun is the run's CI state.
type ciRun struct {
	gates    *gates.File
	base     baseline.Samples
	profiles *profiles.Set
	timeline *timeline.Timeline
}

// reportDir is -report-dir, else $ARTIFACTS, else a new directory under the temp dir.
func reportDir(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if a := os.Getenv(ArtifactsEnv); a != "" {
		return a, os.MkdirAll(a, 0o755)
	}
	// Unique per run: two runs started in the same second must not share a directory.
	base := filepath.Join(os.TempDir(), "ambientmc-reports")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(base, time.Now().Format("20060102-150405")+"-")
}

// runAsParent runs the tests in a child that writes junit.xml (testrun) unless this process is
// that child, -junit=false, or the binary only lists tests. done says the run happened there.
func runAsParent() (code int, done bool) {
	if testrun.IsChild() || !ciFlags.JUnit || flagValue("test.list") != "" {
		return 0, false
	}
	dir, err := reportDir(flags.ReportDir)
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
		Package: testedPackage(), Dir: dir, Args: args, Verbose: flagValue("test.v"),
		Stdout: os.Stdout, Stderr: os.Stderr,
		Extra: func() []junit.Case { return gateCases(dir) },
	}), true
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

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

// loadGates reads -gates and -baseline before anything starts: a path the report schema lacks,
// a bad bound or a baseline that cannot be judged is one error naming the field and the fix.
func (e *Env) loadGates() error {
	e.ci = &ciRun{}
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
	e.ci.gates = f
	switch {
	case ciFlags.Baseline == "" && len(f.Baseline) > 0:
		e.Logf("gates: %d bounds; its %d baseline bounds are judged only with -baseline=DIR", len(f.Bounds), len(f.Baseline))
		return nil
	case ciFlags.Baseline == "":
		return nil
	case len(f.Baseline) == 0:
		return fmt.Errorf("-baseline=%s: -gates=%s has no baseline: section; add one saying which benchmarks may regress by how much", ciFlags.Baseline, ciFlags.Gates)
	}
	if e.ci.base, _, err = baseline.Read(ciFlags.Baseline); err != nil {
		return fmt.Errorf("-baseline=%s: %w", ciFlags.Baseline, err)
	}
	var errs []error
	for _, b := range f.Baseline {
		if err := baseline.Check(e.ci.base, b, 1, f.Alpha); err != nil {
			errs = append(errs, fmt.Errorf("-baseline=%s with -gates=%s: %w", ciFlags.Baseline, ciFlags.Gates, err))
		}
	}
	return errors.Join(errs...)
}

// startCI opens the metrics timeline and the profile set in the report directory.
func (e *Env) startCI() error {
	if e.ci == nil {
		e.ci = &ciRun{}
	}
	if err := os.MkdirAll(e.ReportDir, 0o755); err != nil {
		return err
	}
	e.Report.Artifacts = &report.Artifacts{Dir: os.Getenv(ArtifactsEnv), MetricsCSV: timeline.File}
	if e.Report.Artifacts.Dir != "" {
		e.Report.Artifacts.Logs = LogsDir
		e.Cleanup("copy component logs to $"+ArtifactsEnv, e.copyLogsToArtifacts)
	}
	if testrun.IsChild() {
		e.Report.Artifacts.JUnit, e.Report.Artifacts.TestOutput = testrun.JUnitFile, testrun.OutputFile
	}
	var err error
	if e.ci.timeline, err = timeline.Open(filepath.Join(e.ReportDir, timeline.File)); err != nil {
		return err
	}
	e.Cleanup("close "+timeline.File, e.ci.timeline.Close)
	e.ci.profiles = profiles.New(e.ReportDir, ciFlags.Profiles)
	return nil
}

// Sampled is an istiod with its sampler (a mesh.Istiod).
type Sampled interface {
	Cluster() string
	Sampler() *measure.Istiod
}

// RecordMetrics keeps every scrape of i in the report's metrics.csv.
func (e *Env) RecordMetrics(i Sampled) {
	if e.ci != nil && e.ci.timeline != nil {
		e.ci.timeline.Follow(i.Cluster(), i.Sampler())
	}
}

// Profile keeps i's heap and goroutine profiles, named for when (e.g. "baseline",
// "after-join-cluster-3"), and returns their files relative to the report directory. A profile
// that cannot be had is a warning, not a failure.
func (e *Env) Profile(i Sampled, when string) []string {
	if e.ci == nil {
		return nil
	}
	files, err := e.ci.profiles.Snapshot(context.Background(), i.Sampler(), i.Cluster(), when)
	if err != nil {
		e.warnProfile(err)
	}
	return files
}

// ProfileCPU starts a 5 s CPU profile of i in the background (a join's convergence and settle fit
// in it; istiod idles after); wait returns once it is kept.
func (e *Env) ProfileCPU(i Sampled, when string) (wait func()) {
	if e.ci == nil {
		return func() {}
	}
	w := e.ci.profiles.CPU(context.Background(), i.Sampler(), i.Cluster(), when, 5*time.Second)
	return func() {
		if err := w(); err != nil {
			e.warnProfile(err)
		}
	}
}

// ProfilesBearingOn names the kept profiles that bear on a report path (for failure messages).
func (e *Env) ProfilesBearingOn(path string) []string {
	if e.ci == nil {
		return nil
	}
	return e.ci.profiles.BearingOn(path)
}

func (e *Env) warnProfile(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := "profiles: " + err.Error()
	if !slices.Contains(e.Report.Warnings, w) {
		e.Report.Warnings = append(e.Report.Warnings, w)
		e.Logf("%s", w)
	}
}

// judgeGates judges every gate after the tests, prints one line each, puts them in the report
// and fails the run if one broke. It also records the profiles taken.
func (e *Env) judgeGates(code int) int {
	if e.ci == nil || e.Report == nil {
		return code
	}
	e.Report.Profiles = e.ci.profiles.Taken()
	if e.ci.gates == nil {
		return code
	}
	js, err := report.JSON(e.Report)
	var gs []report.Gate
	if err == nil {
		gs, err = e.ci.gates.Judge(js)
	}
	if err != nil {
		e.Logf("gates: %v", err)
		return max(code, 1)
	}
	if e.ci.base != nil {
		cur := baseline.Samples{}
		if err := cur.ReadBench("this run", bench.Render(e.Report)); err != nil {
			e.Logf("gates: this run's bench lines: %v", err)
			return max(code, 1)
		}
		gs = append(gs, baseline.Judge(e.ci.base, cur, e.ci.gates.Baseline, e.ci.gates.Alpha)...)
	}
	broken := 0
	for i := range gs {
		if gs[i].Verdict == report.GatePass {
			continue
		}
		broken++
		if ps := e.ci.profiles.BearingOn(gs[i].Path); len(ps) > 0 {
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
