package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// start starts spec and makes sure the process does not outlive the test.
func start(t *testing.T, spec Spec) *Process {
	t.Helper()
	p, err := Start(spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop(0) })
	return p
}

func dialProbe(port int) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return c.Close()
	}
}

func TestWaitReadyDialsPort(t *testing.T) {
	ports, err := FreePorts(1)
	require.NoError(t, err)
	p := start(t, helperSpec(t, "cluster-1/serve", "serve", fmt.Sprintf("%s=%d", helperPortEnv, ports[0])))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx, 20*time.Millisecond, dialProbe(ports[0])))

	assert.Equal(t, "cluster-1/serve", p.Name())
	assert.Contains(t, Running(), p)
	assert.Contains(t, p.Tail(5), fmt.Sprintf("serving on 127.0.0.1:%d", ports[0]))
	assert.True(t, p.LogContains("serving on"))
	assert.False(t, p.LogContains("address already in use"))
	assert.NoError(t, p.ExitErr(), "running processes have no exit error")

	rss, err := p.RSSBytes()
	require.NoError(t, err)
	assert.Greater(t, rss, uint64(1<<20), "a Go binary's RSS is more than 1 MiB")
	cpu, err := p.CPUSeconds()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, cpu, 0.0)
	assert.Less(t, cpu, 60.0)

	require.NoError(t, p.Stop(5*time.Second))
	assert.NotContains(t, Running(), p)
	assert.ErrorContains(t, p.ExitErr(), "signal: terminated")
	_, err = p.RSSBytes()
	assert.ErrorContains(t, err, "has exited")
}

func TestWaitReadyFailsFastWhenChildCrashes(t *testing.T) {
	spec := helperSpec(t, "cluster-2/istiod", "crash-early")
	p := start(t, spec)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	began := time.Now()
	err := p.WaitReady(ctx, 20*time.Millisecond, func(context.Context) error { return errors.New("refused") })
	require.Error(t, err)
	assert.Less(t, time.Since(began), 10*time.Second, "must not wait for ctx")

	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "cluster-2/istiod exited before it was ready: exit status 3\n"), msg)
	assert.Contains(t, msg, "--- last 30 lines of "+spec.LogFile+" ---\n")
	assert.Contains(t, msg, "fatal: cannot open config: no such file")
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	assert.Equal(t, 3, exitErr.ExitCode())
	assert.NotContains(t, Running(), p, "exited processes are unregistered")

	// Stop on a process that already failed reports the failure.
	assert.ErrorContains(t, p.Stop(time.Second), "cluster-2/istiod had already exited: exit status 3")
}

func TestWaitReadyIgnoresProbeSuccessAfterExit(t *testing.T) {
	// On a port collision the probe can be answered by whoever holds the port.
	p := start(t, helperSpec(t, "collider", "crash-early"))
	<-p.Done()
	err := p.WaitReady(context.Background(), 10*time.Millisecond, func(context.Context) error { return nil })
	assert.ErrorContains(t, err, "collider exited before it was ready: exit status 3")
}

func TestWaitReadyTimeoutNamesProcess(t *testing.T) {
	spec := helperSpec(t, "cluster-4/kube-apiserver", "block")
	p := start(t, spec)
	require.NoError(t, p.WaitReady(context.Background(), 10*time.Millisecond, logSays(p, "blocking")))

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := p.WaitReady(ctx, 20*time.Millisecond, func(context.Context) error { return errors.New("healthz: 503") })
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "cluster-4/kube-apiserver not ready after "), msg)
	assert.Contains(t, msg, "last probe error: healthz: 503")
	assert.Contains(t, msg, "--- last 30 lines of "+spec.LogFile+" ---\nblocking")
}

func TestStopKillsChildThatIgnoresTerm(t *testing.T) {
	p := start(t, helperSpec(t, "stubborn", "ignore-term"))
	// The signal handler must be in place before SIGTERM, or SIGTERM alone would do.
	require.NoError(t, p.WaitReady(context.Background(), 10*time.Millisecond, logSays(p, "ignoring SIGTERM")))

	const grace = 300 * time.Millisecond
	began := time.Now()
	require.NoError(t, p.Stop(grace))
	assert.GreaterOrEqual(t, time.Since(began), grace)
	assert.ErrorIs(t, syscall.Kill(p.Pid(), 0), syscall.ESRCH)
	assert.ErrorContains(t, p.ExitErr(), "signal: killed")
}

func TestStopKillsGrandchild(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	p := start(t, helperSpec(t, "parent", "spawn-grandchild", helperFileEnv+"="+pidFile))
	gc := readPidFile(t, pidFile, 10*time.Second)
	killAtEnd(t, gc)
	require.NoError(t, p.WaitReady(context.Background(), 10*time.Millisecond, logSays(p, "ignoring SIGTERM")))

	// The parent dies of SIGTERM at once; the grandchild ignores it and must still go.
	require.NoError(t, p.Stop(5*time.Second))
	waitGone(t, gc, 5*time.Second)
}

func TestGroupDiesWithLeader(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	p := start(t, helperSpec(t, "parent", "spawn-grandchild-exit", helperFileEnv+"="+pidFile))
	gc := readPidFile(t, pidFile, 10*time.Second)
	killAtEnd(t, gc)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("parent did not exit")
	}
	require.NoError(t, p.ExitErr())
	waitGone(t, gc, 5*time.Second)
}

func TestStopIsIdempotentAndConcurrent(t *testing.T) {
	p := start(t, helperSpec(t, "shared", "block"))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = p.Stop(5 * time.Second) })
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.NoError(t, p.Stop(time.Second))
	assert.ErrorIs(t, syscall.Kill(p.Pid(), 0), syscall.ESRCH)
}

func TestStopAllLeavesNothingRunning(t *testing.T) {
	var ps []*Process
	for i := range 3 {
		ps = append(ps, start(t, helperSpec(t, fmt.Sprintf("cluster-%d/etcd", i+1), "block")))
	}
	stubborn := start(t, helperSpec(t, "stubborn", "ignore-term"))
	require.NoError(t, stubborn.WaitReady(context.Background(), 10*time.Millisecond, logSays(stubborn, "ignoring SIGTERM")))
	ps = append(ps, stubborn)
	for _, p := range ps {
		assert.Contains(t, Running(), p)
	}

	began := time.Now()
	StopAll(500 * time.Millisecond)
	assert.Less(t, time.Since(began), 5*time.Second, "stops run in parallel")
	assert.Empty(t, Running())
	for _, p := range ps {
		select {
		case <-p.Done():
		default:
			t.Errorf("%s not done after StopAll", p.Name())
		}
		assert.ErrorIs(t, syscall.Kill(p.Pid(), 0), syscall.ESRCH, p.Name())
	}
}

func TestStartPassesEnvAndDirAndCreatesLogDirs(t *testing.T) {
	dir := t.TempDir()
	spec := helperSpec(t, "env", "env", "FOO=bar")
	spec.Dir = dir
	spec.LogFile = filepath.Join(t.TempDir(), "a", "b", "env.log")
	// A stale log from an earlier run must not leak into this one.
	require.NoError(t, os.MkdirAll(filepath.Dir(spec.LogFile), 0o755))
	require.NoError(t, os.WriteFile(spec.LogFile, []byte("address already in use\n"), 0o644))

	p := start(t, spec)
	<-p.Done()
	require.NoError(t, p.ExitErr())
	assert.NoError(t, p.Stop(time.Second), "a clean exit before Stop is not an error")
	assert.True(t, p.LogContains("FOO=bar"), p.Tail(10))
	assert.True(t, p.LogContains("cwd="+dir), p.Tail(10))
	assert.False(t, p.LogContains("address already in use"), "log must be truncated")
	fi, err := os.Stat(spec.LogFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm()&^umask())
}

// umask returns the bits the process umask clears, so the mode check holds under any umask.
func umask() os.FileMode {
	old := syscall.Umask(0)
	syscall.Umask(old)
	return os.FileMode(old)
}

func TestStartFailsForMissingBinary(t *testing.T) {
	before := len(Running())
	_, err := Start(Spec{Name: "cluster-9/etcd", Path: filepath.Join(t.TempDir(), "no-such-binary")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "start cluster-9/etcd")
	assert.Len(t, Running(), before)

	_, err = Start(Spec{Name: "nameless"})
	assert.ErrorContains(t, err, "empty Path")
}

func TestTrapSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			h := signalTrapHelper(t, "trap", tc.sig)
			assert.Equal(t, tc.code, h.exit.ExitCode(), "output:\n%s", h.out)
			// The helper reaped its child in StopAll, so the pid is gone, not a zombie.
			assert.ErrorIs(t, syscall.Kill(h.child, 0), syscall.ESRCH)
			b, err := os.ReadFile(h.mark)
			require.NoError(t, err, "onSignal did not run")
			assert.Equal(t, tc.sig.String(), string(b))
		})
	}
}

func TestTrapSignalsRelease(t *testing.T) {
	h := signalTrapHelper(t, "trap-released", syscall.SIGTERM)
	// Released: SIGTERM's default action, not our exit code.
	ws := h.exit.Sys().(syscall.WaitStatus)
	assert.True(t, ws.Signaled(), "output:\n%s", h.out)
	assert.Equal(t, syscall.SIGTERM, ws.Signal())
	assert.NoFileExists(t, h.mark)
	// Pdeathsig still takes the child down.
	waitGone(t, h.child, 5*time.Second)
}

// trappedHelper is how a helper that ran TrapSignals ended.
type trappedHelper struct {
	exit  *exec.ExitError
	out   *LogBuffer
	child int    // the pid of the child it started
	mark  string // where its onSignal writes the signal's name
}

// signalTrapHelper starts the helper in a trap mode with a child, sends it sig and waits for its
// exit, which must be an error.
func signalTrapHelper(t *testing.T, mode string, sig syscall.Signal) trappedHelper {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	h := trappedHelper{mark: filepath.Join(dir, "mark")}
	helper, out := startHelper(t, mode, helperFileEnv+"="+pidFile, helperDirEnv+"="+dir, helperMarkEnv+"="+h.mark)
	h.out = out
	h.child = readPidFile(t, pidFile, 10*time.Second)
	killAtEnd(t, h.child)

	require.NoError(t, helper.Process.Signal(sig))
	err := waitHelper(t, helper, 15*time.Second)
	require.ErrorAs(t, err, &h.exit, "output:\n%s", out)
	return h
}

func TestChildDiesWithKilledParent(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	helper, _ := startHelper(t, "orphan", helperFileEnv+"="+pidFile, helperDirEnv+"="+dir)
	child := readPidFile(t, pidFile, 10*time.Second)
	killAtEnd(t, child)
	require.False(t, gone(child))

	require.NoError(t, helper.Process.Kill())
	_ = waitHelper(t, helper, 5*time.Second)
	waitGone(t, child, 5*time.Second)
}

// startHelper runs the test binary in a helper mode as a plain child (not through Start, which is
// what the helper itself exercises).
func startHelper(t *testing.T, mode string, env ...string) (*exec.Cmd, *LogBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(append(os.Environ(), helperModeEnv+"="+mode), env...)
	out := &LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, out
}

func waitHelper(t *testing.T, cmd *exec.Cmd, timeout time.Duration) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-errc
		t.Fatalf("helper %s did not exit within %s", cmd.Env[len(cmd.Env)-1], timeout)
		return nil
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(8)
	require.NoError(t, err)
	require.Len(t, ports, 8)
	seen := map[int]bool{}
	for _, port := range ports {
		assert.Greater(t, port, 0)
		assert.False(t, seen[port], "duplicate port %d", port)
		seen[port] = true
		// Closed again, so the child can bind it.
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if assert.NoError(t, err) {
			l.Close()
		}
	}
	none, err := FreePorts(0)
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = FreePorts(-1)
	assert.Error(t, err)
}

func TestFreePortCollisionIsDetectable(t *testing.T) {
	// What a caller sees when another process took the port first: an early exit and the log line
	// to restart on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	p := start(t, helperSpec(t, "late", "serve", fmt.Sprintf("%s=%d", helperPortEnv, port)))
	// Not dialProbe: the other listener would answer it. A real probe must check who answers.
	err = p.WaitReady(context.Background(), 10*time.Millisecond, logSays(p, "serving on"))
	assert.ErrorContains(t, err, "late exited before it was ready: exit status 2")
	assert.True(t, p.LogContains("address already in use"), p.Tail(5))
}
