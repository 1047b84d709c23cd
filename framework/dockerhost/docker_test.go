package dockerhost

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseNetworkInspect(t *testing.T) {
	out := []byte(`[{"Name":"kind","IPAM":{"Driver":"default","Config":[{"Subnet":"fc00:f853:ccd:e793::/64"},{"Subnet":"172.18.0.0/16","Gateway":"172.18.0.1"}]}}]`)
	n, err := parseNetworkInspect(out)
	if err != nil || n.Subnet.String() != "172.18.0.0/16" || n.IPRange.IsValid() {
		t.Fatalf("got %+v, %v; want the IPv4 subnet 172.18.0.0/16", n, err)
	}
}

func TestChooseSubnetAvoidsUsedRanges(t *testing.T) {
	got, err := ChooseSubnet([]netip.Prefix{netip.MustParsePrefix("172.31.0.0/16"), netip.MustParsePrefix("172.30.5.0/24"), netip.MustParsePrefix("10.0.0.0/8")})
	if err != nil || got.String() != "172.29.0.0/16" {
		t.Fatalf("got %s, %v; want 172.29.0.0/16", got, err)
	}
	if _, err := ChooseSubnet([]netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}); err == nil || !strings.Contains(err.Error(), "docker network prune") {
		t.Fatalf("want an error naming the fix when every candidate is used, got %v", err)
	}
}
