// Package testrun runs this test binary again as a child so that plain `go test` (no -json) still
// leaves a junit.xml: the child does the real work with -test.v=test2json, its output (stdout and
// stderr in one pipe, as go test merges them) goes through `go tool test2json`, and the parent
// shows the user what go test would have shown, keeps every byte in test-output.txt, and builds
// junit.xml from the events. Signals go to the child, whose exit status is the run's.
package testrun

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/ambientmc/ambientmc/framework/ci/junit"
)

// ChildEnv marks the re-executed test binary: it runs the tests, not another child.
const ChildEnv = "AMBIENTMC_TEST_CHILD"

// Files the parent writes into Options.Dir.
const (
	JUnitFile  = "junit.xml"
	OutputFile = "test-output.txt"  // what go test -v would print
	EventsFile = "test-events.json" // what go test -json would print
)

// IsChild says whether this process is the child of Run.
func IsChild() bool { return os.Getenv(ChildEnv) == "1" }

// Options configure Run.
type Options struct {
	Package string   // the tested package's import path (test2json -p)
	Dir     string   // where the files go
	Args    []string // the child's arguments
	// Verbose is -test.v as given: "true" prints go test -v's text, "test2json" the framed
	// stream (go test -json converts it), anything else what go test prints without -v.
	Verbose string
	Stdout  io.Writer
	Stderr  io.Writer // the parent's own messages
	// Extra returns testcases to add after the child exited (the gates it judged).
	Extra func() []junit.Case
	// Drain bounds the wait for the child's output after it exited (a grandchild may hold the
	// pipe); 0 means 10 s.
	Drain time.Duration
}

// Run runs the child to the end and returns its exit status.
func Run(o Options) int {
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(o.Stderr, "ambientmc: junit.xml is made with `go tool test2json`, but there is no go command on PATH (%v): put go on PATH, or pass -junit=false\n", err)
		return 2
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		fmt.Fprintf(o.Stderr, "ambientmc: report directory: %v\n", err)
		return 2
	}
	r, err := start(o, goBin)
	if err != nil {
		fmt.Fprintf(o.Stderr, "ambientmc: %v\n", err)
		return 2
	}
	code := r.wait()
	b := junit.NewBuilder(o.Package)
	if err := r.events(b); err != nil {
		fmt.Fprintf(o.Stderr, "ambientmc: %v; the whole output is in %s\n", err, filepath.Join(o.Dir, OutputFile))
	}
	if o.Extra != nil {
		for _, c := range o.Extra() {
			b.AddCase(c)
		}
	}
	host, _ := os.Hostname()
	path := filepath.Join(o.Dir, JUnitFile)
	if err := junit.Write(path, b.Suites(code, host)); err != nil {
		fmt.Fprintf(o.Stderr, "ambientmc: writing %s: %v\n", path, err)
		return max(code, 1)
	}
	fmt.Fprintf(o.Stderr, "ambientmc: %s written\n", path)
	return code
}

// run is one child with its test2json converter.
type run struct {
	o         Options
	child     *exec.Cmd
	conv      *exec.Cmd
	convIn    io.WriteCloser
	eventsOut string
	exited    chan int
	copied    chan struct{} // the child's output is all read
	converted chan error    // test2json finished
	show      *display
	stopSigs  func()
}

func start(o Options, goBin string) (*run, error) {
	out, err := os.Create(filepath.Join(o.Dir, OutputFile))
	if err != nil {
		return nil, err
	}
	events, err := os.Create(filepath.Join(o.Dir, EventsFile))
	if err != nil {
		out.Close()
		return nil, err
	}
	r := &run{o: o, eventsOut: events.Name(), exited: make(chan int, 1), copied: make(chan struct{}), converted: make(chan error, 1)}
	r.show = newDisplay(o.Stdout, o.Verbose)
	// test2json and the child each get a process group of their own: Ctrl-C at the terminal
	// reaches only this process, which forwards it once to the child.
	r.conv = exec.Command(goBin, "tool", "test2json", "-t", "-p", o.Package)
	r.conv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.conv.Stderr = o.Stderr
	if r.convIn, err = r.conv.StdinPipe(); err != nil {
		return nil, err
	}
	convOut, err := r.conv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := r.conv.Start(); err != nil {
		return nil, fmt.Errorf("starting go tool test2json: %w", err)
	}
	go func() {
		r.converted <- r.show.events(io.TeeReader(convOut, events))
		events.Close()
	}()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	r.child = exec.Command(os.Args[0], o.Args...)
	r.child.Env = append(os.Environ(), ChildEnv+"=1")
	r.child.Stdout, r.child.Stderr = pw, pw
	// Pdeathsig: if this process dies, the child still gets to clean up (SIGTERM is its cue).
	r.child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child ends: keep it for the child's life.
		runtime.LockOSThread()
		if err := r.child.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		r.exited <- exitCode(r.child.Wait())
	}()
	if err := <-started; err != nil {
		pw.Close()
		pr.Close()
		r.convIn.Close()
		return nil, fmt.Errorf("starting the test binary: %w", err)
	}
	pw.Close()
	r.stopSigs = forwardSignals(r.child.Process, o.Stderr)
	go func() {
		r.copy(pr, out)
		out.Close()
		close(r.copied)
	}()
	return r, nil
}

// copy reads the child's output line by line: every line to test2json and test-output.txt, and
// to the user as Verbose asks. If test2json fails, the user gets the plain text from then on.
func (r *run) copy(pr *os.File, out io.Writer) {
	defer pr.Close()
	br := bufio.NewReader(pr)
	convOK := true
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			plain := bytes.TrimPrefix(line, []byte{0x16}) // test2json's framing marker
			out.Write(plain)
			if convOK {
				if _, werr := r.convIn.Write(line); werr != nil {
					convOK = false
					r.show.fallback(fmt.Sprintf("go tool test2json stopped reading (%v)", werr))
				}
			}
			r.show.line(line, plain)
		}
		if err != nil {
			break
		}
	}
	r.convIn.Close()
}

// wait returns the child's exit status once its output is read (or the drain bound passed).
func (r *run) wait() int {
	code := <-r.exited
	r.stopSigs()
	drain := r.o.Drain
	if drain == 0 {
		drain = 10 * time.Second
	}
	select {
	case <-r.copied:
	case <-time.After(drain):
		fmt.Fprintf(r.o.Stderr, "ambientmc: the test binary exited but its output pipe stayed open %s (a process it started holds it); not waiting longer\n", drain)
		r.convIn.Close()
	}
	return code
}

// events waits for test2json and fills b from the events it wrote.
func (r *run) events(b *junit.Builder) error {
	var convErr error
	select {
	case convErr = <-r.converted:
	case <-time.After(30 * time.Second):
		convErr = errors.New("go tool test2json did not finish within 30s of the test binary")
		_ = r.conv.Process.Kill()
	}
	if err := r.conv.Wait(); err != nil && convErr == nil {
		convErr = fmt.Errorf("go tool test2json: %w", err)
	}
	f, err := os.Open(r.eventsOut)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := b.Decode(f); err != nil {
		return err
	}
	return convErr
}

// forwardSignals sends every interrupt, termination, quit (go test's timeout) and hangup this
// process gets to p, as often as it comes (a second Ctrl-C means "now").
func forwardSignals(p *os.Process, log io.Writer) (stop func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				fmt.Fprintf(log, "ambientmc: %s: passing it to the test binary (pid %d)\n", s, p.Pid)
				_ = p.Signal(s)
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// exitCode is the child's status, by the shell's convention when a signal ended it.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}
