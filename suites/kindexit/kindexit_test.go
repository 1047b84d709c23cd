// Package kindexit runs the multicluster suite on kind as a user would and ends it while its
// clusters are being made, by a signal at a point of the setup or by go test's deadline: within a
// minute nothing of the run may be left in Docker (no kind container, no ambientmc- network), and
// the host's kernel settings and /lib/modules must be as before it.
package kindexit

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/proc"
)

// leftWithin is how long after the signal the run may take to leave nothing behind.
const leftWithin = time.Minute

// An exit point: the line of the run's output after which the signal goes (the terminal's
// Ctrl-C reaches the whole process group), or none where go test's deadline ends the run.
type exitPoint struct {
	name   string
	after  string
	sig    syscall.Signal
	twice  bool     // a second signal 2 s after the first (the impatient Ctrl-C)
	flags  []string // beside -test.timeout=10m, unless they set it
	maxRun time.Duration
	// inFlight: the kind creates are running when the run ends, and are stopped.
	inFlight bool
}

var points = []exitPoint{
	{name: "SIGINT right after the network exists", after: "ambientmc: kind: created the internal docker network", sig: syscall.SIGINT},
	{name: "SIGTERM while the nodes are provisioned", after: "Preparing nodes", sig: syscall.SIGTERM},
	{name: "SIGINT during kubeadm init", after: "Starting control-plane", sig: syscall.SIGINT, inFlight: true},
	{name: "two SIGINTs during kubeadm init", after: "Starting control-plane", sig: syscall.SIGINT, twice: true, inFlight: true},
	// Without the junit child run, kind's docker commands are in the signalled group too.
	{name: "SIGINT during kubeadm init without the junit child", after: "Starting control-plane", sig: syscall.SIGINT, inFlight: true, flags: []string{"-junit=false"}},
	// The deadline guard fires 18 s into setup (9/10 of -timeout), during kubeadm init; the plan,
	// scaled down, believes the run fits.
	{name: "go test's deadline during the creates", flags: []string{"-test.timeout=20s", "-plan.factor=0.01"}, maxRun: 20*time.Second + leftWithin, inFlight: true},
	{name: "SIGINT during the CRDs", after: "crds: starting", sig: syscall.SIGINT},
}

// TestNothingLeftOnAnyExit runs the suite on two kind clusters once per exit point. The suite runs
// as go test runs it: a parent that passes signals to a child run in its own process group (the
// junit.xml run, framework/ci/testrun), except where -junit=false leaves one process.
func TestNothingLeftOnAnyExit(t *testing.T) {
	needsDockerAndNodeImage(t)
	if left := leftInDocker(t); left != "" {
		t.Skipf("Docker already holds kind containers or ambientmc networks (another run?); this test needs them gone:\n%s", left)
	}
	before := readHostState(t)
	bin := buildSuite(t)
	for _, pt := range points {
		t.Run(strings.ReplaceAll(pt.name, " ", "_"), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					removeLeft(t) // so that the next point starts from nothing
				}
			})
			start := time.Now()
			signalled, out := runUntil(t, bin, pt)
			deadline := signalled.Add(leftWithin)
			for left := leftInDocker(t); left != ""; left = leftInDocker(t) {
				if time.Now().After(deadline) {
					t.Fatalf("%s after the signal, Docker still holds:\n%s", leftWithin, left)
				}
				time.Sleep(time.Second)
			}
			took := time.Since(signalled)
			require.Equal(t, before, readHostState(t), "the host's kernel settings and /lib/modules as before the run")
			require.NotContains(t, out, "deleting the clusters also failed")
			require.NotContains(t, out, "cleanup destroy clusters:", "the teardown's Destroy succeeded")
			if pt.inFlight {
				require.Contains(t, out, "ambientmc: kind: stopping the create of ambientmc-cluster-", "the creates were in flight and stopped")
			}
			t.Logf("%s: nothing left %.1fs after the signal (%.1fs in all)", pt.name, took.Seconds(), time.Since(start).Seconds())
		})
	}
}

// runUntil starts the suite, ends it at pt and waits for it to exit; it returns when the run was
// ended (the signal, or the exit where the deadline ends it) and what the run printed.
func runUntil(t *testing.T, bin string, pt exitPoint) (time.Time, string) {
	t.Helper()
	args := append([]string{"-test.v", "-test.run=^TestClusters$", "-test.timeout=10m", "-provider=kind", "-clusters=2", "-report-dir=" + t.TempDir()}, pt.flags...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Join(root(), "suites", "multicluster")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group
	var out proc.LogBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("the run's output:\n%s", out.String())
		}
	})
	if pt.after == "" {
		return endedByDeadline(t, &out, exited, pt), out.String()
	}
	waitFor(t, &out, exited, pt.after)
	signalled := time.Now()
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, pt.sig))
	if pt.twice {
		time.Sleep(2 * time.Second)
		_ = syscall.Kill(-cmd.Process.Pid, pt.sig)
	}
	select {
	case err := <-exited:
		require.Error(t, err, "an interrupted run exits non-zero")
	case <-time.After(leftWithin):
		t.Fatalf("the run did not exit within %s of %s", leftWithin, pt.sig)
	}
	removeRunDirs(out.String())
	return signalled, out.String()
}

// endedByDeadline waits for a run that go test's deadline ends, and returns when it exited.
func endedByDeadline(t *testing.T, out *proc.LogBuffer, exited chan error, pt exitPoint) time.Time {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(pt.maxRun):
		t.Fatalf("the run did not end within %s of its start", pt.maxRun)
	}
	require.Contains(t, out.String(), "the test's -timeout is about to expire: deleting every cluster now")
	removeRunDirs(out.String())
	return time.Now()
}

// removeRunDirs removes the run directories an ended run kept for its logs.
func removeRunDirs(out string) {
	for _, m := range regexp.MustCompile(`logs kept in (\S+)`).FindAllStringSubmatch(out, -1) {
		if strings.HasPrefix(filepath.Base(m[1]), "ambientmc-run-") {
			os.RemoveAll(m[1])
		}
	}
}

// waitFor waits until the run printed line, failing if it exits first or takes five minutes.
func waitFor(t *testing.T, out *proc.LogBuffer, exited chan error, line string) {
	t.Helper()
	timeout := time.After(5 * time.Minute)
	for !strings.Contains(out.String(), line) {
		select {
		case err := <-exited:
			t.Fatalf("the run exited (%v) before printing %q", err, line)
		case <-timeout:
			t.Fatalf("the run did not print %q within 5 minutes", line)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
