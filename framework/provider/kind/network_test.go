package kind

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A first run has no kind network yet: preflight creates it as kind would and cuts the pools from
// the subnet Docker chose, not from the usual 172.18.0.0/16.
func TestPreflightCreatesTheKindNetworkFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	f.docker.network = Network{}
	f.docker.ipam = Network{Subnet: netip.MustParsePrefix("172.23.0.0/16")}
	topo := generate(t, 3)
	if err := f.p.Preflight(context.Background(), topo); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.docker.created, []string{"kind"}) {
		t.Fatalf("networks created: %v, want kind", f.docker.created)
	}
	if want := "docker network kind (created now as kind would create it; Docker chose the subnet): subnet 172.23.0.0/16 has room for the LoadBalancer pools of 3 clusters"; !strings.Contains(f.log.String(), want) {
		t.Errorf("preflight log lacks %q:\n%s", want, f.log.String())
	}
	cs, err := f.p.Create(context.Background(), topo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if pool := f.lb.pools[c.Name]; !f.docker.ipam.Subnet.Contains(pool.Addr()) {
			t.Errorf("%s: pool %s is not cut from the network Docker created (%s)", c.Name, pool, f.docker.ipam.Subnet)
		}
	}
}

// A daemon whose default address pools are /24s gives kind a /24, with room for 3 pools: four
// clusters fail in preflight, before any cluster exists.
func TestPreflightRefusesANetworkWithoutRoomFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	f.docker.network = Network{}
	f.docker.ipam = Network{Subnet: netip.MustParsePrefix("172.18.5.0/24")}
	err := f.p.Preflight(context.Background(), generate(t, 4))
	if err == nil {
		t.Fatal("preflight passed with room for 3 pools and 4 clusters")
	}
	if want := "docker network kind has subnet 172.18.5.0/24: its upper quarter holds 3 LoadBalancer pools of 16 addresses, 4 clusters need 4"; !strings.Contains(err.Error(), want) {
		t.Errorf("error lacks %q:\n%v", want, err)
	}
	if len(f.kind.creates) != 0 {
		t.Error("preflight created clusters")
	}
}

func TestKindNetworkNameFollowsKindsOverrideFakeDocker(t *testing.T) {
	t.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", "kind-ambient")
	d := &fakeDocker{ipam: Network{Subnet: netip.MustParsePrefix("172.30.0.0/16")}}
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
	if err := NewDocker().CreateNetwork(context.Background(), "kind"); err != nil {
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
