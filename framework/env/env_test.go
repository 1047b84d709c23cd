package env

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/flagtest"
)

// flagsWith returns the registered defaults with change applied.
func flagsWith(change func(*Flags)) Flags {
	f := *register(flag.NewFlagSet("test", flag.ContinueOnError))
	change(&f)
	return f
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), mode))
	return p
}

// setupWith runs the environment setup with flags f and no extra steps, then tears down.
func setupWith(t *testing.T, f Flags) error {
	t.Helper()
	e := &Env{Log: io.Discard, Flags: f, start: time.Now(), run: newRunState(), setupTook: map[string]time.Duration{}}
	err := e.setup(context.Background(), Suite{})
	e.teardown()
	if e.RunDir != "" {
		_, statErr := os.Stat(e.RunDir)
		assert.True(t, os.IsNotExist(statErr), "run directory %s removed after a failed setup", e.RunDir)
	}
	if e.ReportDir != "" && f.ReportDir == "" && os.Getenv(ArtifactsEnv) == "" {
		_, statErr := os.Stat(e.ReportDir)
		assert.True(t, os.IsNotExist(statErr), "the empty report directory %s this run made is removed after a failed setup", e.ReportDir)
	}
	return err
}

func TestSetupRejectsBadInputBeforeStartingAnything(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "topo.yaml", "clusters:\n- name: a\n- name: a\n", 0o644)
	unknownField := writeFile(t, dir, "typo.yaml", "clusters:\n- name: a\n  netwrok: n1\n", 0o644)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	remote := writeFile(t, dir, "remote.json", `[{"kind":"Kubernetes","clusterName":"p"},{"kind":"Kubernetes","clusterName":"r","primaryClusterName":"p"}]`, 0o644)

	for _, tc := range []struct {
		name  string
		flags Flags
		want  []string
	}{
		{"duplicate cluster", flagsWith(func(f *Flags) { f.Topology = bad; f.Provider = "local" }), []string{bad, "clusters[1].name", "duplicate"}},
		{"unknown field", flagsWith(func(f *Flags) { f.Topology = unknownField; f.Provider = "local" }), []string{unknownField, "netwrok"}},
		{"missing file", flagsWith(func(f *Flags) { f.Topology = filepath.Join(dir, "nope.yaml"); f.Provider = "local" }), []string{"nope.yaml", "-topology"}},
		{"zero clusters", flagsWith(func(f *Flags) { f.Clusters = 0; f.Provider = "local" }), []string{"-clusters"}},
		{"more networks than clusters", flagsWith(func(f *Flags) { f.Clusters = 2; f.Networks = 3 }), []string{"-networks", "1 (one network) to 2"}},
		{"networks with a topology file", flagsWith(func(f *Flags) { f.Topology = bad; f.Networks = 2 }), []string{"-networks=2", "drop -networks"}},
		{"unknown provider", flagsWith(func(f *Flags) { f.Clusters = 2; f.Provider = "minikube" }), []string{"-provider=minikube", "choose one of kind, kube, local"}},
		{"bad istiods", flagsWith(func(f *Flags) { f.Istiods = "some" }), []string{"-mesh.istiods=some", "all or observed"}},
		{"remote on local", flagsWith(func(f *Flags) { f.Topology = remote; f.Provider = "local" }), []string{"r", "local provider", "primaryClusterName"}},
		{"unknown scale", flagsWith(func(f *Flags) { f.Scale = "huge" }), []string{"-scale=\"huge\"", "small"}},
		{"fewer pods than services", flagsWith(func(f *Flags) { f.Services = 10; f.Pods = 5 }), []string{"-pods=5", "-services"}},
		{"negative services", flagsWith(func(f *Flags) { f.Services = -1 }), []string{"-services=-1"}},
		{"observe unknown", flagsWith(func(f *Flags) { f.Clusters = 2; f.Observe = "cluster-9" }), []string{"-observe=cluster-9", "no such cluster"}},
		{"observe a remote", flagsWith(func(f *Flags) { f.Topology = remote; f.Observe = "r" }), []string{"-observe=r", "not a primary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Env{Log: io.Discard, Flags: tc.flags, start: time.Now()}
			require.Error(t, e.checkInput(Suite{}), "refused by the input check, before any directory or provider exists")
			err := setupWith(t, tc.flags)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Provider requirements that only a provider's preflight can see are refused there, still before
// any cluster exists.
func TestSetupRefusesKindWithoutItsNeeds(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	kind := flagsWith(func(f *Flags) { f.Clusters = 2; f.Provider = "kind" })
	for _, tc := range []struct {
		name string
		set  map[string]string // provider flags
		want []string
	}{
		{"kind with a hub and no tag", map[string]string{"istio.hub": "h"}, []string{"-provider=kind", "-istio.tag", "or neither"}},
		// DOCKER_HOST points at a socket nobody serves, as on a machine without Docker.
		{"kind without docker", map[string]string{"istio.hub": "h", "istio.tag": "t"}, []string{"kind preflight: docker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, v := range tc.set {
				flagtest.Set(t, name, v)
			}
			err := setupWith(t, kind)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Each provider checks its own flags, and the registry refuses another provider's, before
// anything starts.
func TestSetupRejectsBadProviderFlagsBeforeStartingAnything(t *testing.T) {
	images := map[string]string{"istio.hub": "registry.istio.io/testing", "istio.tag": "1.31-dev"}
	for _, tc := range []struct {
		name, provider string
		set            map[string]string
		want           string
	}{
		{"unknown platform", "kube", map[string]string{"istio.platform": "eks"},
			"-istio.platform=eks: not one of Istio's platforms (gke, k3d, k3s, microk8s, minikube, openshift)"},
		{"platform without the kube provider", "local", map[string]string{"istio.platform": "gke"},
			"-istio.platform=gke: only -provider=kube reads it and this run uses -provider=local, so drop the flag"},
		{"kind flag with the local provider", "local", map[string]string{"kind.wait": "5m"},
			"-kind.wait=5m0s: only -provider=kind reads it and this run uses -provider=local, so drop the flag"},
		{"istio image with the local provider", "local", map[string]string{"istio.hub": "x"},
			"-istio.hub=x: only -provider=kind or kube reads it and this run uses -provider=local, so drop the flag"},
		{"local wave", "local", map[string]string{"local.wave": "-1"}, "-local.wave=-1: must be 0"},
		{"kind parallel", "kind", map[string]string{"kind.parallel": "0"}, "-kind.parallel=0: need at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.provider != "local" {
				for name, v := range images {
					flagtest.Set(t, name, v)
				}
			}
			for name, v := range tc.set {
				flagtest.Set(t, name, v)
			}
			err := setupWith(t, flagsWith(func(f *Flags) { f.Clusters = 1; f.Provider = tc.provider }))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCleanupsRunNewestFirstAndOnce(t *testing.T) {
	e := &Env{Log: io.Discard}
	var order []string
	e.Cleanup("first", func() error { order = append(order, "first"); return nil })
	e.Cleanup("second", func() error { order = append(order, "second"); return errors.New("left a container") })
	e.Cleanup("third", func() error { order = append(order, "third"); return nil })
	assert.Equal(t, []string{"second"}, e.teardown(), "the failed cleanup is named, and the rest still run")
	assert.Empty(t, e.teardown())
	assert.Equal(t, []string{"third", "second", "first"}, order)
}

func TestFailedRunKeepsLogs(t *testing.T) {
	e := &Env{Log: io.Discard, Flags: flagsWith(func(f *Flags) { f.Clusters = 1 }), start: time.Now()}
	var err error
	e.RunDir, err = os.MkdirTemp("", "ambientmc-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(e.RunDir) })
	dir := e.RunDir
	e.Cleanup("remove run directory", e.removeRunDir)
	e.keepLogs()
	assert.False(t, e.keepRunDir, "an empty run directory is not worth keeping")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd.log"), []byte("boom"), 0o600))
	e.keepLogs()
	e.teardown()
	_, err = os.Stat(filepath.Join(dir, "etcd.log"))
	assert.NoError(t, err, "logs survive a failed run")
}

// A run whose -run selects none of the suite's planned tests sets nothing up; any planned one, or
// no -run, sets up as before.
func TestARunSelectingNoPlannedTestSetsNothingUp(t *testing.T) {
	s := Suite{Planned: []string{"TestControlPlaneJoin", "TestChurn"}}
	flagtest.Set(t, "test.run", "^TestPlan")
	assert.True(t, s.selectsNone())
	flagtest.Set(t, "test.run", "TestChurn|TestPlan")
	assert.False(t, s.selectsNone())
	flagtest.Set(t, "test.run", "")
	assert.False(t, s.selectsNone())
	flagtest.Set(t, "test.skip", "TestControlPlaneJoin|TestChurn")
	assert.True(t, s.selectsNone(), "-skip counts too")
	assert.False(t, Suite{}.selectsNone(), "a suite that names no planned tests always sets up")
}

// The signal handler, the deadline's cut and Run may each tear down: a second call waits for the
// first to finish, so that none returns, and exits the process, halfway through it (which left a
// kind run's containers and network behind).
func TestTeardownWaitsForTheOneRunning(t *testing.T) {
	e := &Env{Log: io.Discard}
	started, release := make(chan struct{}), make(chan struct{})
	finished := false
	e.Cleanup("delete the clusters", func() error {
		close(started)
		<-release
		finished = true
		return nil
	})
	go e.teardown()
	<-started
	second := make(chan struct{})
	go func() {
		e.teardown()
		close(second)
	}()
	select {
	case <-second:
		t.Fatal("the second teardown returned while the first still ran its cleanup")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-second
	assert.True(t, finished)
}
