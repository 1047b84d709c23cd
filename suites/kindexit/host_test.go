package kindexit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/images"
)

// hostState is what kubelet in a node and Docker change on the host (the Makefile's HOST_STATE).
var hostState = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

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
