package kind

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
)

// Preflight chooses the run network's subnet and creates nothing; Create creates the network
// --internal before the first node, with the pools cut from it, and Destroy removes it.
func TestRunNetworkIsInternalAndRemovedFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	f.docker.network = dockerhost.Network{Subnet: netip.MustParsePrefix("172.31.0.0/16")} // another network holds 172.31
	topo := generate(t, 3)
	if err := f.p.Preflight(context.Background(), topo); err != nil {
		t.Fatal(err)
	}
	if len(f.docker.created) != 0 {
		t.Fatalf("preflight created networks: %v", f.docker.created)
	}
	cs, err := f.p.Create(context.Background(), topo)
	if err != nil {
		t.Fatal(err)
	}
	name := dockerhost.RunNetworkName(f.dir)
	if !slices.Equal(f.docker.internal, []string{name}) {
		t.Fatalf("internal networks created: %v, want [%s]", f.docker.internal, name)
	}
	if got := os.Getenv("KIND_EXPERIMENTAL_DOCKER_NETWORK"); got != name {
		t.Errorf("kind is pointed at network %q, want %s", got, name)
	}
	want := netip.MustParsePrefix("172.30.0.0/16")
	for _, c := range cs {
		if pool := f.lb.pools[c.Name]; !want.Contains(pool.Addr()) {
			t.Errorf("%s: pool %s is not cut from the run network %s", c.Name, pool, want)
		}
	}
	if err := f.p.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.docker.removed, []string{name}) {
		t.Errorf("networks removed: %v, want [%s]", f.docker.removed, name)
	}
}

func TestKindNetworkNameFollowsKindsOverrideFakeDocker(t *testing.T) {
	t.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", "kind-ambient")
	d := &fakeDocker{ipam: dockerhost.Network{Subnet: netip.MustParsePrefix("172.30.0.0/16")}}
	net, created, err := EnsureNetwork(context.Background(), d)
	if err != nil || !created || net.Subnet != d.ipam.Subnet || !slices.Equal(d.created, []string{"kind-ambient"}) {
		t.Fatalf("got %+v created=%v err=%v, networks created %v; want kind-ambient created with %s", net, created, err, d.created, d.ipam.Subnet)
	}
	if _, created, _ := EnsureNetwork(context.Background(), d); created {
		t.Error("an existing network is created again")
	}
}

// The real docker CLI path, with a `docker` on PATH that records its arguments: the network is
// created with kind's own options and the default bridge's MTU, as kind's createNetwork does.
func TestDockerCLICreatesTheNetworkAsKindDoes_FakeDockerCLI(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nif [ \"$1 $2 $3\" = \"network inspect bridge\" ]; then echo 1400; fi\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if err := dockerhost.NewDocker().CreateNetwork(context.Background(), "kind", netip.Prefix{}, false); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	want := "network inspect bridge -f {{ index .Options \"com.docker.network.driver.mtu\" }}\n" +
		"network create -d=bridge -o com.docker.network.bridge.enable_ip_masquerade=true -o com.docker.network.driver.mtu=1400 kind\n"
	if string(data) != want {
		t.Errorf("docker ran:\n%s\nwant:\n%s", data, want)
	}
}

// On an internal network kind's create ends with its kubeconfig export failing, the cluster up:
// that one error is not a failure, any other still is.
func TestKindExportFailureOnInternalNetworkFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	f.kind.internalNetwork = true
	if _, err := f.p.Create(context.Background(), generate(t, 2)); err != nil {
		t.Fatalf("the export failure of an internal network failed the create: %v", err)
	}
	g := newFixture(t, nil)
	g.kind.failCreate = map[string]bool{"ambientmc-cluster-1": true}
	if _, err := g.p.Create(context.Background(), generate(t, 1)); err == nil {
		t.Fatal("a kubeadm failure passed")
	}
}
