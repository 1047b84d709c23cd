package report

import (
	"fmt"
)

// Verdicts of a gate.
const (
	GatePass        = "pass"
	GateFail        = "fail"
	GateNotMeasured = "not-measured" // the run did not produce the value: a failure, never a pass
)

// Gate is one bound of a -gates file, judged after every test ran.
type Gate struct {
	// Path is the JSON path the bound applies to (e.g. "churn.runs[*].lost"), or for a
	// comparison with -baseline the benchmark and unit ("Join/perRemote:live-heap-B").
	Path string `json:"path"`
	// Bound says what the value had to satisfy, e.g. "max 5e+06" or "in [pass known-issue]".
	Bound   string `json:"bound"`
	Reason  string `json:"reason,omitempty"`
	Verdict string `json:"verdict"` // pass, fail or not-measured
	// Values are the values the path reached (one per element where it has [*]); absent when
	// not measured.
	Values []GateValue `json:"values,omitempty"`
	// Baseline is the benchstat comparison behind a -baseline gate.
	Baseline *GateBaseline `json:"baseline,omitempty"`
	// Message is the line printed for the gate (and the failure message in junit.xml).
	Message string `json:"message"`
	// Profiles are the istiod profiles (paths inside the report directory) that bear on a
	// broken gate.
	Profiles []string `json:"profiles,omitempty"`
}

// GateValue is one value a gate's path reached.
type GateValue struct {
	Path   string   `json:"path"` // the concrete path, e.g. churn.runs[2].lost
	Number *float64 `json:"number,omitempty"`
	Text   *string  `json:"text,omitempty"`
	Pass   bool     `json:"pass"`
}

// GateBaseline is a benchstat comparison of one benchmark and unit against a baseline run.
type GateBaseline struct {
	Benchmark string `json:"benchmark"`
	Unit      string `json:"unit"`
	// BaseMedian and Median are the centers benchstat compares (medians); Change is
	// Median/BaseMedian - 1.
	BaseMedian float64  `json:"baseMedian"`
	Median     float64  `json:"median"`
	Change     *float64 `json:"change,omitempty"` // absent when the base median is 0
	P          float64  `json:"p"`
	Alpha      float64  `json:"alpha"`
	BaseN      int      `json:"baseN"`
	N          int      `json:"n"`
}

// Profile is one istiod pprof profile kept in the report directory.
type Profile struct {
	Istiod string `json:"istiod"` // cluster name
	Kind   string `json:"kind"`   // heap, goroutine, cpu
	When   string `json:"when"`   // e.g. baseline, after-join-cluster-3, after-leave-cluster-2
	File   string `json:"file"`   // relative to the report directory
	// Seconds is how long taking it took (for a CPU profile, its duration, spent in the
	// background). WaitedSeconds is how long the suite then waited for a CPU profile to end.
	// The run's wall-time cost of its profiles is the heap and goroutine profiles' seconds plus
	// the CPU profiles' waited seconds.
	Seconds       float64  `json:"seconds"`
	WaitedSeconds *float64 `json:"waitedSeconds,omitempty"`
	Bytes         int64    `json:"bytes"`
}

// Artifacts says where a run left what a CI job uploads besides the report.
type Artifacts struct {
	// Dir is $ARTIFACTS, when the report directory defaulted to it.
	Dir string `json:"dir,omitempty"`
	// Logs is where every component's log is: "logs" (inside the report directory: a copy of the
	// run directory with the providers' cluster dumps, made by every run under $ARTIFACTS), or
	// the run directory a failed run kept.
	Logs string `json:"logs,omitempty"`
	// JUnit, MetricsCSV and TestOutput are files in the report directory, where written.
	JUnit      string `json:"junit,omitempty"`
	MetricsCSV string `json:"metricsCSV,omitempty"`
	TestOutput string `json:"testOutput,omitempty"`
}

func validateGates(gs []Gate) error {
	for i, g := range gs {
		switch g.Verdict {
		case GatePass, GateFail, GateNotMeasured:
		default:
			return fmt.Errorf("gates[%d].verdict %q is not pass, fail or not-measured", i, g.Verdict)
		}
	}
	return nil
}
