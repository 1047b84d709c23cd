package kind

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/topology"
)

// fakeInCluster records what kind hands the in-cluster part.
type fakeInCluster struct {
	missingInCluster
	checked, created *topology.Topology
	destroyCtxErr    error
	destroys         int
}

func (f *fakeInCluster) Preflight(_ context.Context, t *topology.Topology) error {
	f.checked = t
	return nil
}
func (f *fakeInCluster) Create(_ context.Context, t *topology.Topology) ([]*cluster.Cluster, error) {
	f.created = t
	return nil, nil
}
func (f *fakeInCluster) Destroy(ctx context.Context) error {
	f.destroys++
	f.destroyCtxErr = ctx.Err()
	return nil
}
func (f *fakeInCluster) ControlPlane() cluster.ControlPlane { return f }
func (f *fakeInCluster) Gateways() cluster.Gateways         { return f }
func (f *fakeInCluster) Facts() cluster.Facts               { return cluster.Facts{} }

func TestHandOverUsesInternalKubeconfigsFakeDocker(t *testing.T) {
	in := &fakeInCluster{}
	f := newFixture(t, func(o *Options) { o.InCluster = in })
	cs, err := f.p.Create(context.Background(), generate(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if in.checked == nil || in.created != in.checked {
		t.Fatal("the in-cluster part was not preflighted and created with the same topology")
	}
	if in.checked.Source == topology.SourceGenerated {
		t.Error("handed over a topology marked generated, which the kube provider refuses")
	}
	for i, tc := range in.created.Clusters {
		if tc.Kubeconfig != cs[i].InternalKubeconfig || tc.Name != cs[i].Name || tc.Network != cs[i].Network {
			t.Errorf("handed over %+v, want cluster %s with its internal kubeconfig %s", tc, cs[i].Name, cs[i].InternalKubeconfig)
		}
	}
	if f.p.ControlPlane() != cluster.ControlPlane(in) {
		t.Error("ControlPlane is not the in-cluster part's")
	}
	if _, ok := f.p.Offered().(probe.Deployer); ok {
		t.Error("probes offered although the in-cluster part deploys none")
	}
	if err := f.p.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.p.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if in.destroys != 1 || in.destroyCtxErr == nil {
		t.Errorf("in-cluster Destroy ran %d times (ctx err %v), want once with a done context: the clusters are deleted whole", in.destroys, in.destroyCtxErr)
	}
}

// TestRealDockerCLIUnreachableDaemon runs the real docker CLI (where one is installed) against a
// socket nobody listens on: preflight must say so in one line naming Docker and the fix.
func TestRealDockerCLIUnreachableDaemon(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker CLI on PATH")
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "nobody.sock"))
	t.Setenv("DOCKER_CONTEXT", "")
	f := newFixture(t, func(o *Options) { o.Docker = dockerhost.NewDocker() })
	start := time.Now()
	err := f.p.Preflight(context.Background(), generate(t, 2))
	if err == nil {
		t.Fatal("preflight passed without a Docker daemon")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "Docker daemon is not reachable") || !strings.Contains(msg, "start it") {
		t.Errorf("want one line naming Docker and the fix, got:\n%v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("preflight took %s", d)
	}
}
