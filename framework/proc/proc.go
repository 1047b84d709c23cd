package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tailLines is how many log lines error messages quote.
const tailLines = 30

// killWait bounds the wait after SIGKILL; only a process stuck in the kernel outlives it.
const killWait = 10 * time.Second

// Spec describes a process to start.
type Spec struct {
	Name    string   // human name used in messages, e.g. "cluster-3/kube-apiserver"; defaults to the binary's base name
	Path    string   // binary
	Args    []string // arguments, without the binary
	Env     []string // KEY=VALUE pairs added to os.Environ()
	Dir     string   // working directory (optional)
	LogFile string   // stdout and stderr go here (truncated, created 0644 with parent dirs); empty discards output
}

// Process is a started process. Its methods are safe for concurrent use.
type Process struct {
	spec Spec
	cmd  *exec.Cmd
	pid  int

	done    chan struct{}
	exitErr error            // set before done is closed
	state   *os.ProcessState // set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// Start starts spec's binary in its own process group with Pdeathsig=SIGKILL and registers it,
// so Running and StopAll see it until it exits.
func Start(spec Spec) (*Process, error) {
	if spec.Path == "" {
		return nil, fmt.Errorf("proc: %q: empty Path", spec.Name)
	}
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	var logf *os.File
	if spec.LogFile != "" {
		if err := os.MkdirAll(filepath.Dir(spec.LogFile), 0o755); err != nil {
			return nil, fmt.Errorf("start %s: %w", spec.Name, err)
		}
		// Truncate so Tail and LogContains describe this run only (a restart after a port
		// collision must not see the previous run's "address already in use").
		f, err := os.OpenFile(spec.LogFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", spec.Name, err)
		}
		logf = f
		// An *os.File is handed to the child as its fd: no copying goroutines, and output
		// survives even if this process dies first.
		cmd.Stdout, cmd.Stderr = f, f
	}
	err := spawn(cmd)
	if logf != nil {
		logf.Close() // the child holds its own copy
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}

	p := &Process{spec: spec, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	register(p)
	go p.wait()
	return p, nil
}

// wait reaps the process, after first killing whatever is left of its group: the group lives and
// dies with its leader.
func (p *Process) wait() {
	// Wait without reaping, so the zombie leader keeps the group id from being reused while the
	// stragglers are killed.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	err := p.cmd.Wait()
	p.exitErr = err
	p.state = p.cmd.ProcessState
	// Unregister before done is closed, so Running is accurate once Stop or Done returns.
	unregister(p)
	close(p.done)
}

var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// spawn starts cmd from one OS thread that lives as long as this process. Pdeathsig fires when
// the thread that forked the child exits, not the process (golang/go#27505); a caller's goroutine
// that is locked to its thread and then exits would otherwise kill its children.
func spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays for the life of the process
			for r := range spawner.reqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}

// Name returns the human name from the Spec.
func (p *Process) Name() string { return p.spec.Name }

// Pid returns the process id, which is also its process group id.
func (p *Process) Pid() int { return p.pid }

// LogFile returns the path of the log file ("" when output is discarded).
func (p *Process) LogFile() string { return p.spec.LogFile }

// Done is closed when the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr returns why the process exited: nil for exit status 0, an *exec.ExitError otherwise.
// It returns nil while the process is running.
func (p *Process) ExitErr() error {
	select {
	case <-p.done:
		return p.exitErr
	default:
		return nil
	}
}

// exitStatus describes how the process ended, e.g. "exit status 3" or "signal: killed".
func (p *Process) exitStatus() error {
	if p.exitErr != nil {
		return p.exitErr
	}
	return errors.New(p.state.String())
}

// WaitReady calls probe every interval until it returns nil. It fails early if the process exits
// first, with the exit status and the log's tail in the error, and on ctx's end with the last probe
// error and the log's tail. The error wraps the exit error or ctx.Err().
//
// A probe that succeeds while the process has already exited does not count: on a port collision
// the probe may be answered by whoever holds the port. A probe should therefore check that the
// answer comes from this process where it can (a freshly bound port can still be someone else's).
// While TrapSignals handles a signal, WaitReady does not return an error; it waits for the exit.
func (p *Process) WaitReady(ctx context.Context, interval time.Duration, probe func(context.Context) error) error {
	if probe == nil {
		return fmt.Errorf("%s: WaitReady needs a probe", p.Name())
	}
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	start := time.Now()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var lastErr error
	for {
		select {
		case <-p.done:
			return p.exitedBeforeReady()
		default:
		}
		if lastErr = probe(ctx); lastErr == nil {
			select {
			case <-p.done:
				return p.exitedBeforeReady()
			default:
				return nil
			}
		}
		select {
		case <-p.done:
			return p.exitedBeforeReady()
		case <-ctx.Done():
			holdIfInterrupted()
			return fmt.Errorf("%s not ready after %s: %w; last probe error: %w%s",
				p.Name(), time.Since(start).Round(time.Millisecond), ctx.Err(), lastErr, p.tailSection())
		case <-ticker.C:
		}
	}
}

func (p *Process) exitedBeforeReady() error {
	holdIfInterrupted()
	return fmt.Errorf("%s exited before it was ready: %w%s", p.Name(), p.exitStatus(), p.tailSection())
}

// holdIfInterrupted blocks for good while TrapSignals handles a signal: it is about to exit the
// process, and returning an error would let the caller report a bogus failure and exit first,
// with its own exit code.
func holdIfInterrupted() {
	if Interrupted() {
		for {
			time.Sleep(time.Hour)
		}
	}
}

// HoldIfInterrupted is holdIfInterrupted for a caller whose own work a signal ended (a run's
// setup, its tests): TrapSignals' handler tears down and exits, and the caller must not exit
// first, halfway through that teardown.
func HoldIfInterrupted() { holdIfInterrupted() }

// Interrupted says TrapSignals is handling a signal: the process is about to exit.
func Interrupted() bool {
	select {
	case <-interrupt.ch:
		return true
	default:
		return false
	}
}

// tailSection is the log excerpt appended to error messages.
func (p *Process) tailSection() string {
	if p.spec.LogFile == "" {
		return ""
	}
	tail := p.Tail(tailLines)
	if tail == "" {
		tail = "(empty)"
	}
	return fmt.Sprintf("\n--- last %d lines of %s ---\n%s", tailLines, p.spec.LogFile, tail)
}

// Stop sends SIGTERM to the process group, waits up to grace for the process to exit, then sends
// SIGKILL to the group, and waits for the exit. A grace <= 0 kills at once. Stop is idempotent and
// safe to call concurrently; every call returns the first call's result. It returns nil if the
// process ended because of Stop or had exited cleanly before, and an error naming the exit status
// if it had already failed on its own.
func (p *Process) Stop(grace time.Duration) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(grace) })
	return p.stopErr
}

// StopSlot empties slot under mu and stops the process it held outside the lock (Stop waits up to
// grace); a second call finds the slot empty. A holder whose process another goroutine may
// replace or stop keeps it in such a slot.
func StopSlot(mu *sync.Mutex, slot **Process, grace time.Duration) {
	mu.Lock()
	p := *slot
	*slot = nil
	mu.Unlock()
	if p != nil {
		_ = p.Stop(grace)
	}
}

func (p *Process) stop(grace time.Duration) error {
	select {
	case <-p.done:
		if p.exitErr != nil {
			return fmt.Errorf("%s had already exited: %w", p.Name(), p.exitErr)
		}
		return nil
	default:
	}
	if grace > 0 {
		if err := p.signalGroup(syscall.SIGTERM); err != nil {
			return err
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-p.done:
			return nil
		case <-timer.C:
		}
	}
	if err := p.signalGroup(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s (pid %d) still running %s after SIGKILL", p.Name(), p.pid, killWait)
	}
}

// signalGroup signals the whole group; ESRCH means it is already gone.
func (p *Process) signalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: %s to process group %d: %w", p.Name(), sig, p.pid, err)
	}
	return nil
}
