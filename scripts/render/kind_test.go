package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
)

// TestRenderKindTenClusters is the done-when line: -provider=kind -clusters=10 writes kind configs
// that decode strictly as v1alpha4 with 10 distinct pod and service subnets, MetalLB pools that do
// not overlap, and istiods and ztunnels that carry their own cluster and network.
func TestRenderKindTenClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("renders Istio for 10 clusters")
	}
	out := t.TempDir()
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"-provider=kind", "-clusters=10", "-istio.hub=example.com/hub", "-istio.tag=t1", "-probes=false", "-out", out}, &stdout, io.Discard))
	var ranges, pools []netip.Prefix
	for i := 1; i <= 10; i++ {
		name, network := fmt.Sprintf("cluster-%d", i), fmt.Sprintf("network-%d", i)
		dir := filepath.Join(out, name)
		data, err := os.ReadFile(filepath.Join(dir, "kind-config.yaml"))
		require.NoError(t, err)
		cfg, err := kindconfig.DecodeConfig(data)
		require.NoError(t, err, "%s: strict v1alpha4", name)
		assert.Equal(t, kindconfig.KindName(name), cfg.Name)
		assert.Contains(t, cfg.KubeadmConfigPatches[0], "apiVersion: kubeadm.k8s.io/v1beta4", "the default v1.37 image takes v1beta4")
		ranges = append(ranges, netip.MustParsePrefix(cfg.Networking.PodSubnet), netip.MustParsePrefix(cfg.Networking.ServiceSubnet))
		for _, o := range decode(t, filepath.Join(dir, "metallb-pool.yaml")) {
			if o.GetKind() == "IPAddressPool" {
				addrs, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "addresses")
				require.Len(t, addrs, 1)
				pools = append(pools, netip.MustParsePrefix(addrs[0]))
			}
		}
		_, env := workload(t, filepath.Join(dir, "03-istiod.yaml"), "Deployment", "istiod")
		assert.Equal(t, name, env["CLUSTER_ID"])
		_, env = workload(t, filepath.Join(dir, "05-ztunnel.yaml"), "DaemonSet", "ztunnel")
		assert.Equal(t, name, env["ISTIO_META_CLUSTER_ID"])
		assert.Equal(t, network, env["NETWORK"])
	}
	require.Len(t, ranges, 20)
	require.Len(t, pools, 10)
	for _, set := range [][]netip.Prefix{ranges, pools} {
		for i := range set {
			for j := i + 1; j < len(set); j++ {
				assert.False(t, set[i].Overlaps(set[j]), "%s overlaps %s", set[i], set[j])
			}
		}
	}
	kindNet := netip.MustParsePrefix(kindconfig.DefaultNetworkSubnet)
	for _, p := range pools {
		assert.True(t, kindNet.Contains(p.Addr()), "pool %s inside the kind network %s", p, kindNet)
	}
}

func TestRenderKindRefusesUnknownImageTag(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	err := run([]string{"-provider=kind", "-kind.image=kindest/node:latest", "-istio.hub=h", "-istio.tag=t", "-out", out}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-kind.image=kindest/node:latest")
	assert.NoDirExists(t, out, "nothing written before the error")
}

// fakeDocker answers the network questions render asks, as the docker CLI would.
type fakeDocker struct {
	err     error // every call fails so (no daemon)
	network dockerhost.Network
	ipam    dockerhost.Network // what a created network gets
	created []string
}

func (d *fakeDocker) ServerVersion(context.Context) (string, error)       { return "28.1.1", d.err }
func (d *fakeDocker) ImagePresent(context.Context, string) (bool, error)  { return true, d.err }
func (d *fakeDocker) SaveImages(context.Context, string, ...string) error { return d.err }
func (d *fakeDocker) RunContainer(context.Context, string, string, string, map[string]string) (netip.Addr, error) {
	return netip.Addr{}, errors.New("render starts no container")
}
func (d *fakeDocker) ImageLabel(context.Context, string, string) (string, error) {
	return "", d.err
}
func (d *fakeDocker) Subnets(context.Context) ([]netip.Prefix, error)              { return nil, d.err }
func (d *fakeDocker) RemoveNetwork(context.Context, string) error                  { return d.err }
func (d *fakeDocker) LabelledContainers(context.Context, string) ([]string, error) { return nil, d.err }
func (d *fakeDocker) RemoveContainers(context.Context, []string) error             { return d.err }
func (d *fakeDocker) Network(context.Context, string) (dockerhost.Network, error) {
	if d.err != nil {
		return dockerhost.Network{}, d.err
	}
	if !d.network.Subnet.IsValid() {
		return dockerhost.Network{}, dockerhost.ErrNoNetwork
	}
	return d.network, nil
}
func (d *fakeDocker) CreateNetwork(_ context.Context, name string, _ netip.Prefix, _ bool) error {
	if d.err != nil {
		return d.err
	}
	d.created = append(d.created, name)
	d.network = d.ipam
	return nil
}

// withDocker makes render ask d instead of the docker CLI.
func withDocker(t *testing.T, d dockerhost.Docker) {
	old := newDocker
	newDocker = func() dockerhost.Docker { return d }
	t.Cleanup(func() { newDocker = old })
}

func TestMain(m *testing.M) {
	// No test asks this host's Docker: by default there is none to ask.
	newDocker = func() dockerhost.Docker {
		return &fakeDocker{err: errors.New("Cannot connect to the Docker daemon")}
	}
	os.Exit(m.Run())
}

// kindPoolOf reads the pool render wrote for a cluster.
func kindPoolOf(t *testing.T, dir string) netip.Prefix {
	t.Helper()
	for _, o := range decode(t, filepath.Join(dir, "metallb-pool.yaml")) {
		if o.GetKind() == "IPAddressPool" {
			addrs, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "addresses")
			require.Len(t, addrs, 1)
			return netip.MustParsePrefix(addrs[0])
		}
	}
	t.Fatalf("no IPAddressPool in %s", dir)
	return netip.Prefix{}
}

// Render says which kind network subnet it cut the pools from, and how it knows it.
func TestRenderKindSaysWhichSubnetItUsed(t *testing.T) {
	render := func(t *testing.T, d dockerhost.Docker, extra ...string) (string, string, error) {
		withDocker(t, d)
		out := filepath.Join(t.TempDir(), "out")
		var stdout bytes.Buffer
		// One cluster unless a case asks for more: what is checked is where the pools come from,
		// and every cluster costs a full Istio render (about a CPU-second).
		args := append([]string{"-provider=kind", "-clusters=1", "-istio.hub=example.com/hub", "-istio.tag=t1", "-probes=false", "-out", out}, extra...)
		err := run(args, &stdout, io.Discard)
		return out, stdout.String(), err
	}
	t.Run("NoDocker", func(t *testing.T) {
		_, stdout, err := render(t, &fakeDocker{err: errors.New("Cannot connect to the Docker daemon")})
		require.NoError(t, err)
		assert.Contains(t, stdout, "kind network: subnet 172.18.0.0/16 (assumed, Docker's usual first address pool: no Docker to ask (Cannot connect to the Docker daemon); the kind provider checks the real subnet in its preflight)")
	})
	t.Run("NoNetworkYet", func(t *testing.T) {
		d := &fakeDocker{}
		_, stdout, err := render(t, d)
		require.NoError(t, err)
		assert.Contains(t, stdout, "kind network: subnet 172.18.0.0/16 (assumed, Docker's usual first address pool: no docker network kind exists yet")
		assert.Contains(t, stdout, "pass -kind.create-network to create it now")
		assert.Empty(t, d.created, "render creates nothing unless asked")
	})
	t.Run("LiveNetwork", func(t *testing.T) {
		// Two clusters here: the second pool is cut from the live subnet too.
		out, stdout, err := render(t, &fakeDocker{network: dockerhost.Network{Subnet: netip.MustParsePrefix("172.19.0.0/16")}}, "-clusters=2")
		require.NoError(t, err)
		assert.Contains(t, stdout, "kind network: subnet 172.19.0.0/16 (docker network inspect kind)")
		assert.True(t, netip.MustParsePrefix("172.19.0.0/16").Contains(kindPoolOf(t, filepath.Join(out, "cluster-2")).Addr()))
	})
	t.Run("CreateNetwork", func(t *testing.T) {
		d := &fakeDocker{ipam: dockerhost.Network{Subnet: netip.MustParsePrefix("172.21.0.0/16")}}
		out, stdout, err := render(t, d, "-kind.create-network")
		require.NoError(t, err)
		assert.Equal(t, []string{"kind"}, d.created)
		assert.Contains(t, stdout, "kind network: subnet 172.21.0.0/16 (docker network kind, created now as kind would create it; Docker chose the subnet)")
		assert.True(t, d.ipam.Subnet.Contains(kindPoolOf(t, filepath.Join(out, "cluster-1")).Addr()))
	})
	t.Run("GivenSubnet", func(t *testing.T) {
		_, stdout, err := render(t, &fakeDocker{network: dockerhost.Network{Subnet: netip.MustParsePrefix("172.19.0.0/16")}}, "-kind.subnet=10.200.0.0/16")
		require.NoError(t, err)
		assert.Contains(t, stdout, "kind network: subnet 10.200.0.0/16 (given by -kind.subnet)")
	})
	t.Run("NoRoomIsRefusedBeforeWriting", func(t *testing.T) {
		withDocker(t, &fakeDocker{network: dockerhost.Network{Subnet: netip.MustParsePrefix("172.18.5.0/24")}})
		out := filepath.Join(t.TempDir(), "out")
		err := run([]string{"-provider=kind", "-clusters=4", "-istio.hub=h", "-istio.tag=t", "-out", out}, io.Discard, io.Discard)
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(err.Error(), "kind network 172.18.5.0/24 (docker network inspect kind): "), err.Error())
		assert.Contains(t, err.Error(), "holds 3 LoadBalancer pools of 16 addresses, 4 clusters need 4")
		assert.NoDirExists(t, out, "nothing written before the error")
	})
}
