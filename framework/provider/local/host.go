package local

import (
	"fmt"
	"syscall"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/topology"
)

// Memory model for preflight, from the setup sections of runs here (API servers with the slimmed
// CRDs and apiServerGC's settings; RSS, so with room): per cluster its API server and etcd share,
// more with Go's default GC; per istiod a base and a share of every pod of every cluster it
// watches; per kube-controller-manager its own part (the binary's pages once) and the
// EndpointSlices its API server then holds. File descriptors are per process; the shared etcd
// holds the most, since every API server opens several clients to it. The figures:
// docs/measurements.md#why-the-settings-are-what-they-are.
const (
	apiServerMemory   = 260 << 20
	defaultGCMemory   = 80 << 20
	apiServerPerPod   = 45 << 10
	controllersMemory = 40 << 20
	controllersPerPod = 18 << 10
	controllersBinary = 80 << 20
	istiodMemory      = 300 << 20
	// A watched-only cluster's API server and controller-manager (watchedonly.go), each private
	// part and share with the same room as the figures above.
	watchedOnlyAPIServerMemory   = 120 << 20
	watchedOnlyControllersMemory = 25 << 20
	istiodPerMeshPod             = 25 << 10
	fileDescriptors              = 1024
	fileDescPerMember            = 64
)

// roomyGCMemory is what an API server at roomyGOGC takes beyond one at Go's default GC, and
// roomyGOGC that setting: where the host has the memory, a rarely collecting API server saves
// the CPU its collector would spend (docs/measurements.md#why-the-settings-are-what-they-are).
const (
	roomyGCMemory = 315 << 20
	roomyGOGC     = 400
)

// roomyNeed is what a run of t needs with roomyGOGC, given need, what it needs without.
func roomyNeed(t *topology.Topology, need uint64) uint64 {
	return need + uint64(len(t.Clusters))*roomyGCMemory
}

// roomyGC reports whether a run of t, whose API servers would run Go's default GC, can give them
// roomyGOGC instead: roomy, what it then needs (roomyNeed), is at most two thirds of avail, the
// host's available memory. A host with less runs the default, which preflight asks for.
func (p *Provider) roomyGC(t *topology.Topology, roomy, avail uint64) bool {
	if p.opts.APIServerGOGC > 0 || !defaultGC(len(t.Clusters), p.opts.PodsPerCluster) {
		return false
	}
	return roomy <= avail/3*2
}

// hostMemory is what a run of t needs: every cluster (with its controller-manager unless turned
// off), and the istiods Options.Istiods names
// (0: one per primary), each of which watches every cluster.
func (p *Provider) hostMemory(t *topology.Topology) uint64 {
	n, pods := uint64(len(t.Clusters)), uint64(max(p.opts.PodsPerCluster, 0))
	var watched uint64
	for _, c := range t.Clusters {
		if p.watchedOnly(c.Name) {
			watched++
		}
	}
	need := (n-watched)*apiServerMemory + watched*watchedOnlyAPIServerMemory + n*pods*apiServerPerPod
	if defaultGC(len(t.Clusters), int(pods)) {
		need += n * defaultGCMemory
	}
	if !p.opts.NoControllers {
		need += controllersBinary + (n-watched)*controllersMemory + watched*watchedOnlyControllersMemory + n*pods*controllersPerPod
	}
	var istiods uint64
	switch {
	case p.noIstiod:
	case p.opts.Istiods > 0:
		istiods = uint64(p.opts.Istiods)
	default: // one per primary
		for _, c := range t.Clusters {
			if c.IsPrimary() {
				istiods++
			}
		}
	}
	return need + istiods*(istiodMemory+n*pods*istiodPerMeshPod)
}

// checkHost refuses to start what the machine cannot hold, with a message that says what to change.
func checkHost(clusters int, need uint64) error {
	if avail, err := measure.HostMemoryAvailable(); err == nil && avail < need {
		return fmt.Errorf("too few resources: %d local clusters need about %.1f GB of free memory, this host has %.1f GB available; use fewer -clusters, a smaller -scale or -mesh.istiods=observed",
			clusters, float64(need)/1e9, float64(avail)/1e9)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		need := uint64(fileDescriptors + fileDescPerMember*clusters)
		if lim.Max < need {
			return fmt.Errorf("too few file descriptors: %d local clusters need about %d, the hard limit (ulimit -Hn) is %d; raise it", clusters, need, lim.Max)
		}
	}
	return topology.CheckLoopback()
}
