package dockerhost

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// A run's own Docker network. kind's own "kind" network is a bridge with masquerading: Docker
// forwards its containers' traffic out of the host's default route (a fresh cluster's CoreDNS
// dials the API Service's ClusterIP before kube-proxy has programmed it, and that dial leaves the
// machine). The framework's clusters instead share a network the run creates and removes itself,
// created --internal: Docker gives it no masquerading and drops whatever would leave its subnet.
// That keeps traffic on this host by construction, even in a node image without the framework's
// egress guard; the guard inside the framework's node image
// (framework/images) stops what the network cannot: DNS through Docker's embedded resolver, which
// forwards from the host's side.

// runNetworkCandidates are the subnets tried for the run network, in order: Docker's default
// address pools (172.17-31/16) from the top, where a default daemon's own networks are least
// likely, all inside the 172.16.0.0/12 the node guard allows.
func runNetworkCandidates() []netip.Prefix {
	var out []netip.Prefix
	for o := 31; o >= 18; o-- {
		out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(o), 0, 0}), 16))
	}
	return out
}

// ChooseSubnet returns the first candidate subnet that overlaps none of used.
func ChooseSubnet(used []netip.Prefix) (netip.Prefix, error) {
	for _, c := range runNetworkCandidates() {
		free := true
		for _, u := range used {
			if u.Overlaps(c) {
				free = false
				break
			}
		}
		if free {
			return c, nil
		}
	}
	return netip.Prefix{}, errors.New("every /16 from 172.18.0.0 to 172.31.0.0 is used by a Docker network or a route of this host; remove unused Docker networks (docker network prune)")
}

// RunNetworkName is the Docker network of the run whose directory is runDir: unique per run, so
// two runs never share or delete each other's network.
func RunNetworkName(runDir string) string {
	return "ambientmc-" + shortHash(runDir)
}

// HostRoutes are the IPv4 destinations of this host's routing table (/proc/net/route), so that
// the run network's subnet shadows none of them.
func HostRoutes() []netip.Prefix {
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, mask := hexLE(f[1]), hexLE(f[7])
		if mask == 0 {
			continue // the default route overlaps everything and shadows nothing
		}
		bits := 0
		for m := mask; m != 0; m <<= 1 {
			bits++
		}
		out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(dst >> 24), byte(dst >> 16), byte(dst >> 8), byte(dst)}), bits).Masked())
	}
	return out
}

// hexLE reads /proc/net/route's little-endian hex address as a big-endian uint32.
func hexLE(s string) uint32 {
	var v uint32
	if _, err := fmt.Sscanf(s, "%X", &v); err != nil {
		return 0
	}
	return v>>24 | (v>>8)&0xff00 | (v<<8)&0xff0000 | v<<24
}

// shortHash is 8 hex digits of s's SHA-256.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:8]
}
