package local

import (
	"fmt"
	"net"
	"syscall"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/topology"
)

// clusterMemory is what one cluster of a run of n needs. Measured here (10 clusters, small scale):
// a kube-apiserver with the CRDs loaded holds about 420 MB (310 MB with apiServerGC's settings
// above 10 clusters), its share of the etcd about 20 MB, and an istiod about 300 MB; keep headroom
// for the test process and the page cache.
func clusterMemory(n int, istiod bool) uint64 {
	need := uint64(500 << 20)
	if apiServerGC(n) != nil {
		need = 380 << 20
	}
	if istiod {
		need += 300 << 20
	}
	return need
}

// checkHost refuses to start what the machine cannot hold, with a message that says what to change.
// perCluster is what one cluster needs (clusterMemory).
func checkHost(clusters int, perCluster uint64) error {
	if avail, err := measure.HostMemoryAvailable(); err == nil {
		need := uint64(clusters) * perCluster
		if avail < need {
			return fmt.Errorf("too few resources: %d local clusters need about %.1f GB of free memory, this host has %.1f GB available; use fewer -clusters or a smaller -scale",
				clusters, float64(need)/1e9, float64(avail)/1e9)
		}
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		need := uint64(1024 + 512*clusters)
		if lim.Max < need {
			return fmt.Errorf("too few file descriptors: %d local clusters need about %d, the hard limit (ulimit -Hn) is %d; raise it", clusters, need, lim.Max)
		}
	}
	return checkLoopback()
}

// checkLoopback proves the address plan is usable: pods, services and gateways live all over
// 127.0.0.0/8, which Linux routes to lo but macOS does not without aliases.
func checkLoopback() error {
	gw, err := topology.GatewayIP(1)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(gw.String(), "0"))
	if err != nil {
		return fmt.Errorf("the local provider needs all of 127.0.0.0/8 on the loopback interface, but binding %s failed: %v (on macOS add aliases, e.g. `sudo ifconfig lo0 alias %s`)", gw, err, gw)
	}
	return l.Close()
}
