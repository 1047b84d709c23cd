package env

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
)

// ErrCutShort is the cause of every test context once the run was cut short.
var ErrCutShort = errors.New("run cut short")

// runState is what the tests share about the run's time: the context every test context derives
// from, the running top-level test, and what each took.
type runState struct {
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	current *running            // the top-level test running now
	took    map[string]testTime // by top-level test name
	order   []string
}

type running struct {
	t     testing.TB
	name  string
	start time.Time
}

type testTime struct {
	start time.Time
	took  time.Duration
	done  bool
}

func newRunState() *runState {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &runState{ctx: ctx, cancel: cancel, took: map[string]testTime{}}
}

// Context returns the context test t works under: it ends when t ends or when the run is cut
// short (its plan's margin used up, or Ctrl-C), whose cause says why. A test that starts after
// the run was cut is skipped. The first call of a top-level test also starts its clock for the
// report's plan section.
func (e *Env) Context(t testing.TB) context.Context {
	t.Helper()
	rs := e.run
	if err := context.Cause(rs.ctx); err != nil {
		t.Skipf("%v", err)
	}
	if top, _, _ := strings.Cut(t.Name(), "/"); top == t.Name() {
		e.trackTest(t, top)
	}
	ctx, cancel := context.WithCancelCause(rs.ctx)
	t.Cleanup(func() { cancel(context.Canceled) })
	return ctx
}

// trackTest starts the clock of top-level test t, named top, on its first call, and stops it when
// t ends; a person watching sees both (terminalf).
func (e *Env) trackTest(t testing.TB, top string) {
	rs := e.run
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, seen := rs.took[top]; seen {
		return
	}
	rs.took[top] = testTime{start: time.Now()}
	rs.order = append(rs.order, top)
	rs.current = &running{t: t, name: top, start: time.Now()}
	e.terminalf("%s: running", top)
	// Registered first, so it runs last of t's cleanups: until then t may still be failed.
	t.Cleanup(func() {
		rs.mu.Lock()
		tt := rs.took[top]
		tt.took, tt.done = time.Since(tt.start), true
		rs.took[top] = tt
		if rs.current != nil && rs.current.name == top {
			rs.current = nil
		}
		rs.mu.Unlock()
		e.terminalf("%s: %s in %s", top, testStatus(t), tt.took.Round(100*time.Millisecond))
	})
}

// RunContext is the run's own context (cut short like every test's), for work outside a test.
func (e *Env) RunContext() context.Context { return e.run.ctx }

// providerDeadline is when go test's -timeout fires, counted from now (the test binary's alarm
// starts later, so this errs early), less a minute (or a tenth) for deleting the clusters; zero
// without a timeout. Providers whose clusters outlive the process (kind's containers) delete
// them then.
func providerDeadline() time.Time {
	d := plan.TestTimeout()
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(max(d-time.Minute, d*9/10))
}

// deadline is when the run must be cut so that it ends inside go test's limits: the test binary
// panics at -timeout counted from m.Run (zero mRunStart: setup, before m.Run), and go test kills
// it a minute after -timeout counted from its start. The margin is kept for the partial report,
// teardown and exit.
func deadline(p *plan.Plan, processStart, mRunStart time.Time) time.Time {
	at := processStart.Add(p.Timeout + plan.KillGrace)
	if !mRunStart.IsZero() && mRunStart.Add(p.Timeout).Before(at) {
		at = mRunStart.Add(p.Timeout)
	}
	return at.Add(-p.Margin)
}

// armDeadline cuts the run short at the plan's deadline: the running test fails with one message
// naming it, what it had done and where the partial report and the logs are; every test context
// is cancelled; and if the tests have not returned within half the margin, everything is stopped
// and the binary exits, before go test's timeout could print a goroutine dump. disarm stops it.
func (e *Env) armDeadline(p *plan.Plan, mRunStart time.Time, returned <-chan struct{}) (disarm func()) {
	if p == nil || p.Timeout <= 0 {
		return func() {}
	}
	at := deadline(p, e.start, mRunStart)
	timer := time.AfterFunc(time.Until(at), func() {
		why := fmt.Sprintf("the plan's margin before go test's -timeout=%s was used up", p.Timeout)
		e.cutRun(why, p)
		select {
		case <-returned:
		case <-time.After(p.Margin / 2):
			e.Logf("the tests did not stop within %s of the cut: stopping everything and exiting", p.Margin/2)
			e.teardown()
			os.Exit(1)
		}
	})
	return func() { timer.Stop() }
}

// cutRun ends the run early: it says which test was running, for how long against its plan,
// writes the partial report, fails the running test with that message and cancels every test
// context with a cause that says the same.
func (e *Env) cutRun(why string, p *plan.Plan) {
	rs := e.run
	rs.mu.Lock()
	where := "between tests"
	current := rs.current
	if c := current; c != nil {
		where = fmt.Sprintf("in %s after %s", c.name, time.Since(c.start).Round(100*time.Millisecond))
		if p != nil {
			for _, it := range p.Tests {
				if it.Name == c.name {
					where += fmt.Sprintf(" (planned ~%s)", it.Expected.Round(time.Second))
				}
			}
		}
	}
	var done []string
	for _, name := range rs.order {
		if tt := rs.took[name]; tt.done {
			done = append(done, fmt.Sprintf("%s %s", name, tt.took.Round(100*time.Millisecond)))
		}
	}
	rs.mu.Unlock()
	msg := fmt.Sprintf("%s: %s, %s; tests done before: %s; partial report: %s; run directory (logs): %s",
		ErrCutShort, why, where, orNone(done), e.reportPath(), e.RunDir)
	e.cutShort(why + ", " + where)
	e.Logf("%s", msg)
	rs.mu.Lock()
	// Still running (its last cleanup takes this lock), so failing it is allowed.
	if rs.current != nil && rs.current == current {
		current.t.Errorf("%s", msg)
	}
	rs.mu.Unlock()
	rs.cancel(fmt.Errorf("%w: %s", ErrCutShort, why))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// reportPath is where the report is (or will be) written.
func (e *Env) reportPath() string {
	if e.ReportDir == "" {
		return "(none yet)"
	}
	return e.ReportDir + "/report.md"
}

// planReport is the plan beside what each part took.
func (e *Env) planReport(p *plan.Plan) *report.Plan {
	if p == nil {
		return nil
	}
	rs := e.run
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := &report.Plan{TotalSeconds: p.Total().Seconds(), Warnings: p.Warnings}
	if p.Timeout > 0 {
		out.TimeoutSeconds, out.MarginSeconds = report.F(p.Timeout.Seconds()), report.F(p.Margin.Seconds())
	}
	add := func(it plan.Item, actual *float64) {
		out.Items = append(out.Items, report.PlanItem{Name: it.Name, PlannedSeconds: it.Expected.Seconds(), Detail: it.Detail,
			Trimmed: it.Trimmed, ActualSeconds: actual})
	}
	for _, it := range p.Setup {
		var actual *float64
		if d, ok := e.setupTook[it.Name]; ok {
			actual = report.F(d.Seconds())
		}
		add(it, actual)
	}
	for _, it := range p.Tests {
		var actual *float64
		if tt, ok := rs.took[it.Name]; ok && tt.done {
			actual = report.F(tt.took.Seconds())
		}
		add(it, actual)
	}
	return out
}
