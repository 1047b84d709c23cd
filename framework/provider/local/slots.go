package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/ambientmc/ambientmc/topology"
)

// slotDir holds one lock file per cluster index of the loopback address plan. Every run on this
// machine claims the indices it uses there, so two runs never listen on the same pod IPs,
// ClusterIPs or gateway addresses. The locks die with the process, so a killed run frees them.
var slotDir = filepath.Join(os.TempDir(), "ambientmc-address-plan")

// slots are cluster indices of the address plan held by this run.
type slots struct {
	indices []int
	files   []*os.File
}

// claimSlots takes the n lowest free indices (1..topology.MaxClusters) under per-index locks.
func claimSlots(n int) (*slots, error) {
	if err := os.MkdirAll(slotDir, 0o777); err != nil {
		return nil, fmt.Errorf("address plan: %w", err)
	}
	s := &slots{}
	for i := 1; i <= topology.MaxClusters && len(s.indices) < n; i++ {
		f, err := os.OpenFile(filepath.Join(slotDir, "cluster-"+strconv.Itoa(i)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			s.release()
			return nil, fmt.Errorf("address plan: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue // another run on this machine uses index i
		}
		s.indices = append(s.indices, i)
		s.files = append(s.files, f)
	}
	if len(s.indices) < n {
		free := len(s.indices)
		s.release()
		return nil, fmt.Errorf("address plan: %d clusters asked for, but other runs on this machine hold all but %d of the %d cluster indices of the loopback plan (locks in %s): wait for them or ask for fewer clusters",
			n, free, topology.MaxClusters, slotDir)
	}
	return s, nil
}

// release gives the indices back.
func (s *slots) release() {
	for _, f := range s.files {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
	s.files, s.indices = nil, nil
}
