package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemoryCgroup is a memory cgroup holding one process, so its memory can be read the way kubelet
// reads a container's: the working set, the cgroup's usage minus its inactive file pages.
type MemoryCgroup struct {
	Dir string
}

// cgroupRoot is where the cgroup file systems are mounted; tests point it elsewhere.
var cgroupRoot = "/sys/fs/cgroup"

// NewMemoryCgroup creates a memory cgroup named name under this process's own. It needs root and a
// memory controller this process may create cgroups under (cgroup v1's, or v2 with memory enabled
// for its own cgroup's children).
func NewMemoryCgroup(name string) (*MemoryCgroup, error) {
	own, err := ownMemoryCgroup()
	if err != nil {
		return nil, err
	}
	cg := &MemoryCgroup{Dir: filepath.Join(own, name)}
	if err := os.Mkdir(cg.Dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	return cg, nil
}

// Command is path with args started inside the cgroup: a shell moves itself in, then execs the
// program, so every page the program touches is charged to the cgroup (the process keeps the
// shell's PID).
func (c *MemoryCgroup) Command(path string, args []string) (string, []string) {
	script := `echo $$ > "$0/cgroup.procs" && exec "$@"`
	return "/bin/sh", append([]string{"-c", script, c.Dir, path}, args...)
}

// ownMemoryCgroup is the directory of this process's memory cgroup (v1's memory hierarchy, or v2's).
func ownMemoryCgroup() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	var unified string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join(cgroupRoot, "memory", parts[2]), nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	if unified == "" {
		return "", errors.New("memory cgroup: this process is in no memory cgroup")
	}
	dir := filepath.Join(cgroupRoot, unified)
	if _, err := os.Stat(filepath.Join(dir, "memory.current")); err != nil {
		dir = filepath.Join(cgroupRoot, "unified", unified)
	}
	return dir, nil
}

// WorkingSetBytes is the cgroup's working set (WorkingSetBytes of its directory).
func (c *MemoryCgroup) WorkingSetBytes() (float64, error) { return WorkingSetBytes(c.Dir) }

// WorkingSetBytes is the memory usage of the cgroup in dir minus its inactive file pages, as
// kubelet and cAdvisor compute a container's working set (total_inactive_file on cgroup v1,
// inactive_file on v2).
func WorkingSetBytes(dir string) (float64, error) {
	usageFile, inactiveKey := "memory.current", "inactive_file"
	if _, err := os.Stat(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
		usageFile, inactiveKey = "memory.usage_in_bytes", "total_inactive_file"
	}
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", dir, usageFile, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	var inactive uint64
	found := false
	for _, line := range strings.Split(string(stat), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == inactiveKey {
			if inactive, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64); err != nil {
				return 0, fmt.Errorf("%s/memory.stat %s: %w", dir, k, err)
			}
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("%s/memory.stat has no %s", dir, inactiveKey)
	}
	if inactive > usage {
		return 0, nil
	}
	return float64(usage - inactive), nil
}

// Remove deletes the cgroup once its process has exited (gone already is fine).
func (c *MemoryCgroup) Remove() error {
	if err := os.Remove(c.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("memory cgroup: %w", err)
	}
	return nil
}
