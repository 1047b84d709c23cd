package kindconfig

import (
	"fmt"
	"net/netip"
	"regexp"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/ambientmc/ambientmc/topology"
)

// kindRules mirrors sigs.k8s.io/kind/pkg/internal/apis/config/validate.go (v0.33), which is
// internal to kind and runs only once kind has talked to Docker: the rules a single-stack config
// of ours can break. scripts/kind-e2e.sh exercises the real one.
func kindRules(c *v1alpha4.Cluster) []error {
	var errs []error
	if !regexp.MustCompile(`^[a-z0-9.-]+$`).MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("invalid cluster name %q", c.Name))
	}
	if p := c.Networking.APIServerPort; p != 0 && (p < 0 || p > 65535) {
		errs = append(errs, fmt.Errorf("invalid apiServerPort %d", p))
	}
	if c.Networking.IPFamily != v1alpha4.IPv4Family {
		errs = append(errs, fmt.Errorf("ipFamily %q, want ipv4", c.Networking.IPFamily))
	}
	for _, s := range []string{c.Networking.PodSubnet, c.Networking.ServiceSubnet} {
		if p, err := netip.ParsePrefix(s); err != nil || !p.Addr().Is4() {
			errs = append(errs, fmt.Errorf("subnet %q is not one IPv4 CIDR", s))
		}
	}
	switch c.Networking.KubeProxyMode {
	case v1alpha4.IPTablesProxyMode, v1alpha4.IPVSProxyMode, v1alpha4.NFTablesProxyMode, "none":
	default:
		errs = append(errs, fmt.Errorf("invalid kubeProxyMode %q", c.Networking.KubeProxyMode))
	}
	controlPlanes := 0
	for i, n := range c.Nodes {
		if n.Role != v1alpha4.ControlPlaneRole && n.Role != v1alpha4.WorkerRole {
			errs = append(errs, fmt.Errorf("node %d: invalid role %q", i, n.Role))
		}
		if n.Role == v1alpha4.ControlPlaneRole {
			controlPlanes++
		}
		if n.Image == "" {
			errs = append(errs, fmt.Errorf("node %d: no image", i))
		}
	}
	if controlPlanes < 1 {
		errs = append(errs, fmt.Errorf("no control-plane node"))
	}
	return errs
}

func TestConfigsFollowKindsRules(t *testing.T) {
	topo, err := topology.Generate(MaxClusters)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range topo.Clusters {
		cfg, err := Config(tc, Node{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Networking.APIServerPort = 40000 // as Create sets it
		v1alpha4.SetDefaultsCluster(cfg)     // what kind does before validating
		for _, e := range kindRules(cfg) {
			t.Errorf("%s: %v", tc.Name, e)
		}
	}
	// The mirror itself rejects what kind rejects.
	bad := &v1alpha4.Cluster{Name: "Cluster_1", Networking: v1alpha4.Networking{IPFamily: "ipv5", PodSubnet: "10.0.0.0/33"}}
	if errs := kindRules(bad); len(errs) < 4 {
		t.Errorf("the rules mirror accepted a bad config: %v", errs)
	}
}
