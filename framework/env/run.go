package env

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/gcpace"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/provider"
)

// teardown runs the cleanups once, newest first, logs the ones that failed and returns their names.
// A second caller (the signal handler, the deadline's cut and Run itself may all call it) waits for
// the first to finish: returning at once would let it exit the process halfway through.
func (e *Env) teardown() (failed []string) {
	e.tearingDown.Lock()
	defer e.tearingDown.Unlock()
	e.mu.Lock()
	cs := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		if err := cs[i].fn(); err != nil {
			fmt.Fprintf(e.Log, "ambientmc: cleanup %s: %v\n", cs[i].name, err)
			failed = append(failed, cs[i].name)
		}
	}
	return failed
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
	// Before CI's part too: tests of the suite's own parts write no report or junit.xml.
	if s.selectsNone() {
		fmt.Fprintf(os.Stderr, "ambientmc: -run selects none of the suite's planned tests: nothing is set up\n")
		return m.Run()
	}
	if s.CI != nil {
		if code, done := s.CI.Instead(); done { // junit.xml from a child run
			return code
		}
	}
	e := &Env{Log: os.Stderr, Flags: *flags, start: time.Now(), peakMemory: measure.WatchPeakMemory(time.Second),
		run: newRunState(), setupTook: map[string]time.Duration{}, ext: s.CI}
	if tty := openTerminal(s.CI != nil && s.CI.QuietParent()); tty != nil {
		e.terminal = tty
		defer tty.Close()
	}
	// Published before setup: the suite's steps reach the environment through it too.
	*out = e
	defer e.peakMemory.Stop()
	defer gcpace.Start(time.Second).Stop()
	release := proc.TrapSignals(func(sig os.Signal) {
		e.cutRun(fmt.Sprintf("interrupted by %s", sig), e.plan)
		e.Logf("%s: stopping everything", sig)
		e.teardown()
		e.finished(1)
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
		// A signal's handler tears down and exits with the signal's code; what ended the setup
		// is its doing.
		proc.HoldIfInterrupted()
		if cause := context.Cause(e.run.ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		e.Logf("setup failed: %v", err)
		e.keepLogs()
		e.teardown()
		e.finished(1)
		return e.checkLoopback(1)
	}
	e.setReady()
	testsDone := make(chan struct{})
	disarm := e.armDeadline(e.plan, time.Now(), testsDone)
	code = m.Run()
	close(testsDone)
	disarm()
	proc.HoldIfInterrupted()
	if context.Cause(e.run.ctx) != nil {
		code = 1
	}
	e.Report.Plan = e.planReport(e.plan)
	if e.ext != nil {
		code = e.ext.Judge(e, code) // gates after every test
	}
	e.Statusf("tests finished (exit code %d); run took %s", code, time.Since(e.start).Round(100*time.Millisecond))
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
	if failed := e.teardown(); len(failed) > 0 && code == 0 {
		// What a failed cleanup was to remove may still be there (containers, processes, files).
		fmt.Fprintf(e.Log, "ambientmc: the tests passed but the teardown failed (%s): the run fails, as it may have left something behind\n", strings.Join(failed, ", "))
		code = 1
	}
	code = e.checkLoopback(code)
	e.finished(code)
	return code
}

// finished hands the ended run to the extension (CI's artifacts).
func (e *Env) finished(code int) {
	if e.ext != nil {
		e.ext.Finished(e, code)
	}
}

// KeepsRunDir says the run directory stays after the run (-keep, or a failure's logs).
func (e *Env) KeepsRunDir() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.keepRunDir
}

// Warn adds a warning to the report once, and logs it.
func (e *Env) Warn(w string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.Report.Warnings, w) {
		e.Report.Warnings = append(e.Report.Warnings, w)
		e.Logf("%s", w)
	}
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
	if lc, ok := e.Provider.(cluster.Keeper); ok {
		lc.CollectLogs()
	}
	if entries, err := os.ReadDir(e.RunDir); err == nil && len(entries) > 0 {
		e.keepRunDir = true
		e.Logf("component logs kept in %s", e.RunDir)
	}
}
