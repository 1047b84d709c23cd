package env

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"
)

// terminalPath is the controlling terminal; tests point it elsewhere.
var terminalPath = "/dev/tty"

// openTerminal returns the terminal of the person who typed go test, when go test would hide the
// run from them: without -v, go test keeps a passing package's output to itself and prints one
// "ok" line at the end. With -v (and -json, which implies it) the output already streams, and
// without a controlling terminal (CI, a pipe from a script) there is no one watching: nil then.
// quietParent says this run is CI's child run of a go test without -v (always verbose itself).
func openTerminal(quietParent bool) io.WriteCloser {
	if testing.Verbose() && !quietParent {
		return nil
	}
	f, err := os.OpenFile(terminalPath, os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return f
}

// Statusf is Logf for the lines a person watching the run wants as they happen (the plan, each
// setup step and test, the report's path): they also reach the terminal go test would hide them
// from (openTerminal).
func (e *Env) Statusf(format string, args ...any) {
	line := e.line(format, args...)
	io.WriteString(e.Log, line)
	if e.terminal != nil {
		io.WriteString(e.terminal, line)
	}
}

// terminalf writes a line to the watching terminal only: go test -v shows the same itself.
func (e *Env) terminalf(format string, args ...any) {
	if e.terminal != nil {
		io.WriteString(e.terminal, e.line(format, args...))
	}
}

func (e *Env) line(format string, args ...any) string {
	return fmt.Sprintf("ambientmc [%6.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// testStatus is how a finished test ended, as go test -v words it.
func testStatus(t testing.TB) string {
	switch {
	case t.Failed():
		return "FAIL"
	case t.Skipped():
		return "SKIP"
	}
	return "PASS"
}
