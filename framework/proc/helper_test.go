package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests use the test binary itself as the child program: helperSpec re-executes it with
// -test.run=TestHelperProcess and the mode in helperModeEnv.
const (
	helperModeEnv = "AMBIENTMC_PROC_HELPER"
	helperPortEnv = "AMBIENTMC_PROC_PORT"    // serve: the port to listen on
	helperFileEnv = "AMBIENTMC_PROC_PIDFILE" // where a helper writes the pid the test is after
	helperDirEnv  = "AMBIENTMC_PROC_DIR"     // trap, orphan: where the helper puts its child's log
	helperMarkEnv = "AMBIENTMC_PROC_MARK"    // trap: onSignal writes the signal's name here
)

// helperLifetime bounds every helper, so a failing test cannot leave one behind for long.
const helperLifetime = 60 * time.Second

// helperSpec returns a Spec that runs the test binary in the given helper mode.
func helperSpec(t *testing.T, name, mode string, env ...string) Spec {
	t.Helper()
	return Spec{
		Name:    name,
		Path:    os.Args[0],
		Args:    []string{"-test.run=^TestHelperProcess$"},
		Env:     append([]string{helperModeEnv + "=" + mode}, env...),
		LogFile: filepath.Join(t.TempDir(), "logs", name+".log"),
	}
}

// TestHelperProcess is not a test: it is the child program for the other tests.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		t.Skip("child program for the other tests")
	}
	// Exit on our own if the test that started us vanished without killing us.
	time.AfterFunc(helperLifetime, func() { os.Exit(99) })
	switch mode {
	case "serve":
		fmt.Println("starting")
		l, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv(helperPortEnv))
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			os.Exit(2)
		}
		fmt.Println("serving on", l.Addr())
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(2)
			}
			c.Close()
		}
	case "crash-early":
		fmt.Println("starting")
		fmt.Fprintln(os.Stderr, "fatal: cannot open config: no such file")
		os.Exit(3)
	case "block":
		fmt.Println("blocking")
		blockForever()
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		blockForever()
	case "env":
		wd, _ := os.Getwd()
		fmt.Println("FOO=" + os.Getenv("FOO"))
		fmt.Println("cwd=" + wd)
	case "spawn-grandchild", "spawn-grandchild-exit":
		// The grandchild stays in our process group and ignores SIGTERM, so only a signal to
		// the whole group followed by SIGKILL gets rid of it.
		gc := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		gc.Env = append(os.Environ(), helperModeEnv+"=ignore-term")
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "grandchild:", err)
			os.Exit(2)
		}
		writePidFile(gc.Process.Pid)
		if mode == "spawn-grandchild-exit" {
			os.Exit(0)
		}
		blockForever()
	case "trap", "trap-released":
		release := TrapSignals(func(sig os.Signal) {
			_ = os.WriteFile(os.Getenv(helperMarkEnv), []byte(sig.String()), 0o644)
		})
		if mode == "trap-released" {
			release()
		}
		startChildAndWritePid()
		// Setup in progress: a probe that never succeeds, interrupted by the test's signal.
		_ = Running()[0].WaitReady(context.Background(), 10*time.Millisecond, func(context.Context) error {
			return errors.New("not yet")
		})
		os.Exit(98)
	case "orphan":
		startChildAndWritePid()
		blockForever()
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		os.Exit(97)
	}
	os.Exit(0)
}

// startChildAndWritePid starts a "block" child with Start and reports its pid.
func startChildAndWritePid() {
	p, err := Start(Spec{
		Name:    "grandchild",
		Path:    os.Args[0],
		Args:    []string{"-test.run=^TestHelperProcess$"},
		Env:     []string{helperModeEnv + "=block"},
		LogFile: filepath.Join(os.Getenv(helperDirEnv), "child.log"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	writePidFile(p.Pid())
}

// writePidFile writes atomically, so the test never reads half a number.
func writePidFile(pid int) {
	path := os.Getenv(helperFileEnv)
	if err := os.WriteFile(path+".tmp", []byte(strconv.Itoa(pid)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func blockForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// readPidFile waits for a helper's pid file.
func readPidFile(t *testing.T, path string, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid file %s after %s", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone reports whether pid no longer runs. An orphan is reaped by pid 1, which in a container may
// never do it, so a zombie counts as gone.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// waitGone polls until pid is gone.
func waitGone(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still running after %s", pid, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killAtEnd makes sure a pid the test learned about does not outlive the test.
func killAtEnd(t *testing.T, pid int) {
	t.Cleanup(func() {
		if !gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// logSays is a WaitReady probe that waits for a line in the log.
func logSays(p *Process, s string) func(context.Context) error {
	return func(context.Context) error {
		if p.LogContains(s) {
			return nil
		}
		return fmt.Errorf("log does not say %q yet", s)
	}
}
