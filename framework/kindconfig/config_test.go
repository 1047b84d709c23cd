package kindconfig

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/metallb"
	"github.com/ambientmc/ambientmc/topology"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// render is what a golden file holds for n clusters: every kind config, then every MetalLB pool
// cut from the usual kind network.
func render(t *testing.T, n int, image string) []byte {
	t.Helper()
	topo, err := topology.Generate(n)
	if err != nil {
		t.Fatal(err)
	}
	net := dockerhost.Network{Subnet: netip.MustParsePrefix(DefaultNetworkSubnet)}
	pools, err := Pools(net, n)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, tc := range topo.Clusters {
		cfg, err := Config(tc, Node{Image: image})
		if err != nil {
			t.Fatal(err)
		}
		data, err := ConfigYAML(cfg)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# %s: kind config\n%s", tc.Name, data)
		objs, err := metallb.YAML(pools[tc.Index-1])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# %s: MetalLB pool\n%s", tc.Name, objs)
	}
	return b.Bytes()
}

func TestConfigGolden(t *testing.T) {
	for _, g := range []struct {
		n     int
		image string
		file  string
	}{
		{2, DefaultImage, "clusters-2.golden"},
		{10, DefaultImage, "clusters-10.golden"},
		{20, DefaultImage, "clusters-20.golden"},
		{2, "registry.istio.io/testing/kind-node:v1.35.0", "clusters-2-k8s-1.35.golden"}, // kubeadm v1beta3
	} {
		t.Run(g.file, func(t *testing.T) {
			got := render(t, g.n, g.image)
			path := filepath.Join("testdata", g.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./framework/kindconfig -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the rendered configs; run go test ./framework/kindconfig -update and review the diff", path)
			}
		})
	}
}

// TestConfigsDecodeStrictlyAndDoNotOverlap decodes each config as kind does and checks that no
// two ranges of the whole plan (every cluster's pods and services) overlap.
func TestConfigsDecodeStrictlyAndDoNotOverlap(t *testing.T) {
	for _, n := range []int{2, 10, 20, MaxClusters} {
		topo, err := topology.Generate(n)
		if err != nil {
			t.Fatal(err)
		}
		var ranges []netip.Prefix
		var owners []string
		for _, tc := range topo.Clusters {
			cfg, err := Config(tc, Node{})
			if err != nil {
				t.Fatal(err)
			}
			data, err := ConfigYAML(cfg)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeConfig(data)
			if err != nil {
				t.Fatalf("%s: the rendered config does not decode strictly as v1alpha4: %v", tc.Name, err)
			}
			pods := netip.MustParsePrefix(back.Networking.PodSubnet)
			svcs := netip.MustParsePrefix(back.Networking.ServiceSubnet)
			if svcs.Bits() > 20 {
				t.Errorf("%s: service range %s is smaller than /20", tc.Name, svcs)
			}
			if len(back.Nodes) != 1 || back.Nodes[0].Image != DefaultImage {
				t.Errorf("%s: nodes %+v, want one node of %s", tc.Name, back.Nodes, DefaultImage)
			}
			ranges = append(ranges, pods, svcs)
			owners = append(owners, tc.Name+" pods", tc.Name+" services")
		}
		// kind's defaults and the usual docker network must stay clear too.
		for _, r := range []string{"10.244.0.0/16", "10.96.0.0/16", DefaultNetworkSubnet} {
			ranges = append(ranges, netip.MustParsePrefix(r))
			owners = append(owners, r)
		}
		for i := range ranges {
			for j := i + 1; j < len(ranges); j++ {
				if ranges[i].Overlaps(ranges[j]) {
					t.Errorf("n=%d: %s %s overlaps %s %s", n, owners[i], ranges[i], owners[j], ranges[j])
				}
			}
		}
	}
}

func TestDecodeConfigIsStrict(t *testing.T) {
	_, err := DecodeConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  podSubnets: 10.0.0.0/16\n"))
	if err == nil || !strings.Contains(err.Error(), "podSubnets") {
		t.Fatalf("an unknown field decoded: %v", err)
	}
}

func TestKubeadmPatchFollowsNodeImage(t *testing.T) {
	tc := topology.Cluster{Name: "cluster-1", Network: "network-1", Index: 1}
	for image, want := range map[string]string{
		"registry.istio.io/testing/kind-node:v1.35.0":                                                  "kubeadm.k8s.io/v1beta3",
		"kindest/node:v1.35.1@sha256:0000000000000000000000000000000000000000000000000000000000000000": "kubeadm.k8s.io/v1beta3",
		"kindest/node:v1.36.0":                     "kubeadm.k8s.io/v1beta4",
		"localhost:5000/kindest/node:v1.36.2-rc.1": "kubeadm.k8s.io/v1beta4",
		DefaultImage: "kubeadm.k8s.io/v1beta4",
	} {
		cfg, err := Config(tc, Node{Image: image})
		if err != nil {
			t.Fatalf("%s: %v", image, err)
		}
		v4 := want == "kubeadm.k8s.io/v1beta4"
		patches := 1
		if v4 {
			patches = 2 // and the timeouts only v1beta4 has
		}
		if len(cfg.KubeadmConfigPatches) != patches || !strings.HasPrefix(cfg.KubeadmConfigPatches[0], "apiVersion: "+want+"\n") {
			t.Fatalf("%s: patches %q, want %d of apiVersion %s", image, cfg.KubeadmConfigPatches, patches, want)
		}
		if strings.Contains(cfg.KubeadmConfigPatches[0], "- name: leader-elect") != v4 {
			t.Errorf("%s: extraArgs not in %s form:\n%s", image, want, cfg.KubeadmConfigPatches[0])
		}
		if v4 {
			var init struct {
				APIVersion, Kind string
				Metadata         struct{ Name string }
				Timeouts         struct{ KubernetesAPICall string }
			}
			if err := yaml.Unmarshal([]byte(cfg.KubeadmConfigPatches[1]), &init); err != nil {
				t.Fatalf("%s: timeouts patch: %v", image, err)
			}
			// kind applies a patch to the document of the same apiVersion, kind and name.
			if init.APIVersion != want || init.Kind != "InitConfiguration" || init.Metadata.Name != "config" || init.Timeouts.KubernetesAPICall != "4m0s" {
				t.Errorf("%s: timeouts patch %+v, want kubeadm init's API calls given 4m0s", image, init)
			}
		}
	}
}

func TestUnknownImageTagIsOneClearError(t *testing.T) {
	for _, image := range []string{"kindest/node", "kindest/node:latest", "localhost:5000/node", "kindest/node:1.35"} {
		_, err := Config(topology.Cluster{Name: "cluster-1", Index: 1}, Node{Image: image})
		if err == nil {
			t.Errorf("%s: accepted", image)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "-kind.image="+image) || !strings.Contains(msg, "vMAJOR.MINOR.PATCH") || strings.Contains(msg, "\n") {
			t.Errorf("%s: error does not name the flag and the fix on one line: %v", image, err)
		}
	}
}

func TestPoolsDistinctInsideSubnet(t *testing.T) {
	for _, subnet := range []string{"172.18.0.0/16", "172.19.0.0/16", "192.168.64.0/20", "10.200.0.0/12"} {
		net := dockerhost.Network{Subnet: netip.MustParsePrefix(subnet).Masked()}
		pools, err := Pools(net, MaxClusters)
		if err != nil {
			t.Fatalf("%s: %v", subnet, err)
		}
		lower := netip.PrefixFrom(net.Subnet.Addr(), net.Subnet.Bits()+1) // where docker puts nodes
		for i, p := range pools {
			if !net.Subnet.Contains(p.Addr()) || !net.Subnet.Contains(a4(u32(p.Addr())+15)) {
				t.Errorf("%s: pool %s not inside the subnet", subnet, p)
			}
			if p.Overlaps(lower) {
				t.Errorf("%s: pool %s in the lower half, where docker allocates node addresses", subnet, p)
			}
			for _, q := range pools[i+1:] {
				if p.Overlaps(q) {
					t.Errorf("%s: pools %s and %s overlap", subnet, p, q)
				}
			}
		}
	}
	if _, err := Pools(dockerhost.Network{Subnet: netip.MustParsePrefix("172.18.0.0/24")}, 10); err == nil || !strings.Contains(err.Error(), "docker network create kind --subnet") {
		t.Errorf("a /24 kind network held 10 pools, or the error gives no fix: %v", err)
	}
	_, err := Pools(dockerhost.Network{Subnet: netip.MustParsePrefix("172.18.0.0/16"), IPRange: netip.MustParsePrefix("172.18.192.0/20")}, 2)
	if err == nil || !strings.Contains(err.Error(), "--ip-range") {
		t.Errorf("a pool inside docker's --ip-range was accepted: %v", err)
	}
}

func TestCheckPlanRefusesOverlappingNetwork(t *testing.T) {
	if err := CheckPlan(dockerhost.Network{Subnet: netip.MustParsePrefix("10.0.0.0/8")}, 2); err == nil {
		t.Error("a kind network over 10.0.0.0/8 was accepted")
	}
	if err := CheckPlan(dockerhost.Network{Subnet: netip.MustParsePrefix(DefaultNetworkSubnet)}, MaxClusters); err != nil {
		t.Error(err)
	}
}

func TestLongClusterNameIsRefused(t *testing.T) {
	name := strings.Repeat("a", 40)
	_, err := Config(topology.Cluster{Name: name, Index: 1}, Node{})
	if err == nil || !strings.Contains(err.Error(), "at most 39 characters") {
		t.Fatalf("a %d-character cluster name was accepted or the fix is missing: %v", len(name), err)
	}
	if _, err := Config(topology.Cluster{Name: strings.Repeat("a", 39), Index: 1}, Node{}); err != nil {
		t.Fatal(err)
	}
}

func TestNodeEnv(t *testing.T) {
	env, err := NodeEnv(2, netipMust("172.30.0.0/16"))
	require.NoError(t, err)
	require.Equal(t, "POD_RANGE=10.12.0.0/22\nNODE_NETWORK=172.30.0.0/16\nALLOW=\"10.0.0.0/9 10.128.0.0/11 172.30.0.0/16\"\n", env)
}

func netipMust(s string) netip.Prefix { return netip.MustParsePrefix(s) }
