// Package plan is a run's time plan: what setup and each suite are expected to take, worked out
// from their own parameters before anything starts, set against go test's -timeout, and kept
// beside what each actually took. A plan that does not fit is trimmed where a flag allows (with
// a warning naming the flag for the full version) or refused with the -timeout it needs.
package plan

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// Item is one part of a run: setup, or one top-level test.
type Item struct {
	Name     string
	Expected time.Duration
	// Detail says what the figure is made of, e.g. "9 joins x 4.5 s".
	Detail string
	// Trim, when set, returns a shorter version of the item and the warning that says what was
	// cut and which flag restores it. It is called at most once.
	Trim func() (Item, string)
	// Trimmed says the item was trimmed to fit.
	Trimmed bool
}

// Plan is every item of a run against the time go test allows.
type Plan struct {
	// Timeout is go test's -timeout (0: none, nothing is refused).
	Timeout time.Duration
	// Margin is kept free before the timeout: the partial report, teardown and exit.
	Margin time.Duration
	// Setup comes before the tests; go test counts its -timeout from the first test (testing
	// arms its alarm in m.Run), but its own kill, a minute later, from the start of the process.
	Setup []Item
	Tests []Item
	// Warnings say what was trimmed and how to get the full version.
	Warnings []string
}

// Total is the expected length of the whole run.
func (p *Plan) Total() time.Duration { return sum(p.Setup) + sum(p.Tests) }

// TestsTotal is the expected length of the tests alone.
func (p *Plan) TestsTotal() time.Duration { return sum(p.Tests) }

func sum(items []Item) time.Duration {
	var d time.Duration
	for _, it := range items {
		d += it.Expected
	}
	return d
}

// KillGrace is how long after the test binary's -timeout go test itself kills the binary.
const KillGrace = time.Minute

// Fits reports whether the plan fits the timeout with its margin: the tests inside the timeout
// counted from m.Run, and setup plus tests inside go test's kill counted from the process start.
func (p *Plan) Fits() bool {
	if p.Timeout <= 0 {
		return true
	}
	return p.TestsTotal() <= p.Timeout-p.Margin && p.Total() <= p.Timeout+KillGrace-p.Margin
}

// NeededTimeout is the smallest -timeout (rounded up to a minute) the plan fits with its margin
// (the margin itself scaled as MarginFor scales it).
func (p *Plan) NeededTimeout() time.Duration {
	for d := time.Minute; ; d += time.Minute {
		q := *p
		q.Timeout, q.Margin = d, MarginFor(d)
		if q.Fits() {
			return d
		}
	}
}

// MarginFor is the time kept free before a timeout d: a tenth of it, at most 30 s and at least
// 10 s (the partial report, stopping every process, exiting).
func MarginFor(d time.Duration) time.Duration {
	return min(30*time.Second, max(10*time.Second, d/10))
}

// Fit trims items, in order, until the plan fits; it returns an error with the plan and the
// -timeout it needs when even the trimmed plan does not fit.
func (p *Plan) Fit() error {
	for i := range p.Tests {
		if p.Fits() {
			return nil
		}
		it := &p.Tests[i]
		if it.Trim == nil || it.Trimmed {
			continue
		}
		short, warning := it.Trim()
		short.Trimmed, short.Trim = true, nil
		*it = short
		p.Warnings = append(p.Warnings, warning)
	}
	if p.Fits() {
		return nil
	}
	return fmt.Errorf("the run does not fit go test's -timeout=%s: it is planned at %s (with %s kept free for the report and teardown); pass -timeout=%s, or run fewer tests with -run\n%s",
		p.Timeout, p.Total().Round(time.Second), p.Margin, p.NeededTimeout(), p.Table())
}

// Table is the plan as the run prints it at the start.
func (p *Plan) Table() string {
	var b strings.Builder
	row := func(it Item) {
		mark := ""
		if it.Trimmed {
			mark = " (trimmed)"
		}
		fmt.Fprintf(&b, "  %-28s ~%7s  %s%s\n", it.Name, fmtDuration(it.Expected), it.Detail, mark)
	}
	for _, it := range p.Setup {
		row(it)
	}
	for _, it := range p.Tests {
		row(it)
	}
	total := "no -timeout"
	if p.Timeout > 0 {
		total = "of -timeout=" + p.Timeout.String()
	}
	fmt.Fprintf(&b, "  %-28s ~%7s  %s\n", "total", fmtDuration(p.Total()), total)
	return b.String()
}

// fmtDuration rounds to a second (a tenth below ten seconds).
func fmtDuration(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// TestTimeout is go test's -timeout as the test binary got it (0: none, or not a test binary).
// It is the one place the framework reads it.
func TestTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	d, err := time.ParseDuration(f.Value.String())
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// Scale multiplies every item's expected time by f, trimmed versions included: -plan.factor, for
// a host slower (f > 1) or faster than the 2-core reference the estimates come from.
func Scale(items []Item, f float64) []Item {
	if f == 1 {
		return items
	}
	out := make([]Item, len(items))
	for i, it := range items {
		it.Expected = time.Duration(float64(it.Expected) * f)
		if trim := it.Trim; trim != nil {
			it.Trim = func() (Item, string) {
				short, warning := trim()
				short.Expected = time.Duration(float64(short.Expected) * f)
				return short, warning
			}
		}
		out[i] = it
	}
	return out
}
