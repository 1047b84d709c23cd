package dockerhost

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// kubelet in a privileged node writes global kernel settings of the host (its kernel tunables,
// applied unless protectKernelDefaults), and Docker creates an empty /lib/modules on a host
// without one (kind mounts it read-only into every node). The provider records both before the
// first node starts and puts them back once the last one is gone (RecordKernel, Restore).

// kubeletSysctls are the host settings kubelet changes (pkg/kubelet/cm: setupKernelTunables).
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// KernelState is what the host had before the run.
type KernelState struct {
	root    string            // "/" on a real host; tests use a directory
	sysctls map[string]string // name under /proc/sys -> value
	modules bool              // /lib/modules existed
	// mu: Destroy and the second Ctrl-C's kill may restore at once.
	mu       sync.Mutex
	restored bool
}

// RecordKernel reads the settings kubelet may change.
func RecordKernel(root string) *KernelState {
	k := &KernelState{root: root, sysctls: map[string]string{}}
	for _, n := range kubeletSysctls {
		if data, err := os.ReadFile(filepath.Join(root, "proc/sys", n)); err == nil {
			k.sysctls[n] = strings.TrimSpace(string(data))
		}
	}
	_, err := os.Stat(filepath.Join(root, "lib/modules"))
	k.modules = err == nil
	return k
}

// Restore writes back every setting that changed and removes a /lib/modules the run created (only
// when empty); it returns what it changed, for the log.
func (k *KernelState) Restore() ([]string, error) {
	if k == nil {
		return nil, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.restored {
		return nil, nil
	}
	k.restored = true
	var changed []string
	var errs []string
	for n, want := range k.sysctls {
		path := filepath.Join(k.root, "proc/sys", n)
		data, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(data)) == want {
			continue
		}
		if err := os.WriteFile(path, []byte(want+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", n, err))
			continue
		}
		changed = append(changed, fmt.Sprintf("%s %s -> %s", strings.ReplaceAll(n, "/", "."), strings.TrimSpace(string(data)), want))
	}
	if !k.modules {
		dir := filepath.Join(k.root, "lib/modules")
		if entries, err := os.ReadDir(dir); err == nil && len(entries) == 0 {
			if err := os.Remove(dir); err == nil {
				changed = append(changed, "removed the empty /lib/modules Docker created")
			}
		}
	}
	if len(errs) > 0 {
		return changed, fmt.Errorf("restoring the host's kernel settings: %s", strings.Join(errs, "; "))
	}
	return changed, nil
}

// CgroupV1 says whether the host runs cgroup v1 (/sys/fs/cgroup is a tmpfs of controller mounts).
func CgroupV1() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err != nil
}

// KeptKernel is the record as a kept run holds it, for the removal after the run ended.
type KeptKernel struct {
	Sysctls           map[string]string `json:"sysctls"`
	LibModulesExisted bool              `json:"libModulesExisted"`
}

// Kept is k as a kept run records it.
func (k *KernelState) Kept() *KeptKernel {
	if k == nil {
		return nil
	}
	return &KeptKernel{Sysctls: k.sysctls, LibModulesExisted: k.modules}
}

// State is the record restore puts back on the host under root.
func (kk *KeptKernel) State(root string) *KernelState {
	if kk == nil {
		return nil
	}
	return &KernelState{root: root, sysctls: kk.Sysctls, modules: kk.LibModulesExisted}
}
