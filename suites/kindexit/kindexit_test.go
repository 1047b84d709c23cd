// Package kindexit runs the multicluster suite on kind as a user would and ends it while its
// clusters are being made, by a signal at a point of the setup or by go test's deadline: within a
// minute nothing of the run may be left in Docker (no kind container, no ambientmc- network), and
// the host's kernel settings and /lib/modules must be as before it.
package kindexit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/proc"
)

// leftWithin is how long after the signal the run may take to leave nothing behind.
const leftWithin = time.Minute

// hostState is what kubelet in a node and Docker change on the host (the Makefile's HOST_STATE).
var hostState = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

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
		select {
		case <-exited:
		case <-time.After(pt.maxRun):
			t.Fatalf("the run did not end within %s of its start", pt.maxRun)
		}
		require.Contains(t, out.String(), "the test's -timeout is about to expire: deleting every cluster now")
		removeRunDirs(out.String())
		return time.Now(), out.String()
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

// needsDockerAndNodeImage skips where the kind provider's preflight would refuse for want of
// Docker or of what make images builds.
func needsDockerAndNodeImage(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Skipf("needs a Docker engine and the kind node image: run `make engine images` (docker: %s)", strings.TrimSpace(string(out)))
	}
	set, err := images.Default()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ok, err := images.Current(ctx, set); err != nil || !ok {
		t.Skipf("needs the current kind node image %s: run `make engine images` (%v)", set.Node, err)
	}
	if _, err := os.Stat(set.DataPlane); err != nil {
		t.Skipf("needs the emulated data plane's images of these sources, %s: run `make engine images`", set.DataPlane)
	}
}

// buildSuite compiles the multicluster suite as make ci-kind does (no DWARF, no vet pass).
func buildSuite(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "multicluster.test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, "-vet=off", "-ldflags=-w", "./suites/multicluster")
	cmd.Dir = root()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "compiling the suite:\n%s", out)
	return bin
}

// leftInDocker lists every kind container and ambientmc- network, as make ci-kind checks.
func leftInDocker(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"ps", "-a", "--filter", "label=io.x-k8s.kind.cluster", "--format", "container {{.Names}} ({{.Status}})"},
		{"network", "ls", "--filter", "name=ambientmc-", "--format", "network {{.Name}}"},
	} {
		out, err := exec.Command("docker", args...).CombinedOutput()
		require.NoError(t, err, "docker %s: %s", strings.Join(args, " "), out)
		b.Write(out)
	}
	return strings.TrimSpace(b.String())
}

// removeLeft removes what a failed point left, so the next one can run.
func removeLeft(t *testing.T) {
	t.Helper()
	sh := `docker ps -aq --filter label=io.x-k8s.kind.cluster | xargs -r docker rm -f -v; docker network ls -q --filter name=ambientmc- | xargs -r docker network rm`
	if out, err := exec.Command("sh", "-c", sh).CombinedOutput(); err != nil {
		t.Logf("removing what the run left: %v: %s", err, out)
	}
}

func readHostState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, s := range hostState {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		require.NoError(t, err)
		fmt.Fprintf(&b, "%s=%s\n", s, strings.TrimSpace(string(v)))
	}
	_, err := os.Stat("/lib/modules")
	fmt.Fprintf(&b, "/lib/modules exists: %v\n", err == nil)
	return b.String()
}

func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
