package expctx

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Churn cases and modes, as -churn.cases and -churn.modes spell them.
const (
	CaseLocal = "local"
	ModeReady = "ready"
)

var (
	ChurnCases = []string{CaseLocal, "one-remote", "all-remote"}
	ChurnModes = []string{"replace", ModeReady}
)

// The default sweep: one rate on each side of the knee istiod's 100 ms debounce puts near 10
// changes/s (20, not 50: at 10 clusters on 2 cores 50 pods/s saturated the host, achieving 16-22
// pods/s with a p99 of 9 s, and its drain cost the main command 10 s), in short windows, locally
// and in every remote at once (at a total rate, so the work does not grow with the cluster
// count), so that the main command stays within its time budget;
// make e2e runs the full sweep: more rates, windows longer than PILOT_DEBOUNCE_MAX (10 s) to see
// steady state, one remote alone, and readiness flips.
var (
	DefaultChurnRates    = []string{"5", "20"}
	DefaultChurnDuration = 5 * time.Second
	DefaultChurnCases    = []string{CaseLocal, "all-remote"}
	DefaultChurnModes    = []string{"replace"}
	FullChurnRates       = []string{"2", "5", "20", "50"}
	FullChurnDuration    = 20 * time.Second
)

// Churn configures TestChurn.
type Churn struct {
	// Rates are pods changed per second over all churned clusters together (so all-remote churn
	// does the same work at any cluster count), one window per rate.
	Rates []float64
	// Duration is each window's length, unless Percents sizes the windows instead.
	Duration time.Duration
	// Percents, when set, size each window as that share of a cluster's pods (25 = a quarter of
	// them changed), one window per percent and rate, like the AKS sizing guide's churn tests.
	Percents []float64
	// Cases and Modes select what is churned: where, and replace (delete + new pod) or ready
	// (readiness flips; local only).
	Cases, Modes []string
	// Clients is how many ztunnel-like watchers stay connected to the observed istiod during
	// churn (the first one is measured; istiod pushes to each).
	Clients int

	rates, percents, cases, modes string
}

func registerChurn(fs *flag.FlagSet, f *Churn) {
	fs.StringVar(&f.rates, "churn.rates", strings.Join(DefaultChurnRates, ","), "churn rates in pods/s over all churned clusters together, comma-separated; one window each (make e2e: "+strings.Join(FullChurnRates, ",")+")")
	fs.DurationVar(&f.Duration, "churn.duration", DefaultChurnDuration, "length of each churn window in wall time; changes still due when it ends are counted as dropped (make e2e: "+FullChurnDuration.String()+", longer than PILOT_DEBOUNCE_MAX, 10s, to see steady state)")
	fs.StringVar(&f.percents, "churn.percent", "", "size churn windows by share of a cluster's pods instead of -churn.duration, e.g. 25,50")
	fs.StringVar(&f.cases, "churn.cases", strings.Join(DefaultChurnCases, ","), "where to churn: local, one-remote, all-remote (make e2e: all three)")
	fs.StringVar(&f.modes, "churn.modes", strings.Join(DefaultChurnModes, ","), "how to churn: replace (a pod deleted, a new one created), ready (readiness flips, local only) (make e2e: both)")
	fs.IntVar(&f.Clients, "churn.clients", 1, "ztunnel-like xDS clients connected to the observed istiod during churn")
}

// parse turns the flag strings into values, naming the flag on error.
func (f *Churn) parse() error {
	var err error
	if f.Rates, err = floats("-churn.rates", f.rates, 0, 1000); err != nil {
		return err
	}
	if len(f.Rates) == 0 {
		return fmt.Errorf("-churn.rates=%q: give at least one rate", f.rates)
	}
	if f.Percents, err = floats("-churn.percent", strings.ReplaceAll(f.percents, "%", ""), 0, 100); err != nil {
		return err
	}
	if f.Cases, err = choices("-churn.cases", f.cases, ChurnCases); err != nil {
		return err
	}
	if f.Modes, err = choices("-churn.modes", f.modes, ChurnModes); err != nil {
		return err
	}
	if f.Duration <= 0 {
		return fmt.Errorf("-churn.duration=%s: must be positive", f.Duration)
	}
	if f.Clients < 1 || f.Clients > 200 {
		return fmt.Errorf("-churn.clients=%d: between 1 and 200 (the first is the measured watcher)", f.Clients)
	}
	return nil
}

// floats parses a comma-separated list of numbers in (lo, hi].
func floats(name, s string, lo, hi float64) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, err := strconv.ParseFloat(part, 64)
		if err != nil || !(v > lo && v <= hi) {
			return nil, fmt.Errorf("%s=%q: %q is not a number above %g and at most %g", name, s, part, lo, hi)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("%s=%q: %g appears twice", name, s, v)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// choices parses a comma-separated subset of valid, kept in valid's order.
func choices(name, s string, valid []string) ([]string, error) {
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !slices.Contains(valid, part) {
			return nil, fmt.Errorf("%s=%q: unknown %q; choose from %s", name, s, part, strings.Join(valid, ", "))
		}
		seen[part] = true
	}
	var out []string
	for _, v := range valid {
		if seen[v] {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s=%q: choose at least one of %s", name, s, strings.Join(valid, ", "))
	}
	return out, nil
}

// Windows counts the churn windows of the sweep.
func (c Churn) Windows(remotes bool) int {
	w := 0
	for _, where := range c.Cases {
		if where != CaseLocal && !remotes {
			continue
		}
		for _, mode := range c.Modes {
			if mode == ModeReady && where != CaseLocal {
				continue
			}
			w += len(c.Rates) * max(len(c.Percents), 1)
		}
	}
	return w
}

// JoinFloats writes vs as a flag value: comma-separated, shortest form.
func JoinFloats(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}
