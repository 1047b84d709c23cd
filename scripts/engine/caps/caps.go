// Package caps reads the capability bounding set and removes capabilities outside it from OCI
// process specs (the runtime wrapper of `make engine`).
package caps

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// names are the Linux capabilities by bit number (linux/capability.h).
var names = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// Set is a set of capabilities by name.
type Set map[string]bool

// Parse reads a CapBnd mask (hex, as /proc/self/status prints it) up to lastCap.
func Parse(mask string, lastCap int) (Set, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
	if err != nil {
		return nil, fmt.Errorf("capability mask %q: %w", mask, err)
	}
	s := Set{}
	for i := 0; i <= lastCap && i < len(names); i++ {
		if v&(1<<uint(i)) != 0 {
			s[names[i]] = true
		}
	}
	return s, nil
}

// Bounding is this process's capability bounding set.
func Bounding() (Set, error) {
	mask, err := statusField("CapBnd")
	if err != nil {
		return nil, err
	}
	return Parse(mask, LastCap())
}

// LastCap is the highest capability this kernel knows.
func LastCap() int {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return len(names) - 1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return len(names) - 1
	}
	return n
}

// Missing lists the capabilities the kernel knows that s lacks: what a privileged container
// would ask for and runc could not give.
func Missing(s Set, lastCap int) []string {
	var out []string
	for i := 0; i <= lastCap && i < len(names); i++ {
		if !s[names[i]] {
			out = append(out, names[i])
		}
	}
	return out
}

func statusField(key string) (string, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("/proc/self/status has no %s", key)
}

// SpecFiles are the process specs a runc command line hands over: the bundle's config.json
// (create, run) and a --process file (exec, which docker exec uses).
func SpecFiles(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func(flag string) (string, bool) {
			if a == flag && i+1 < len(args) {
				i++
				return args[i], true
			}
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v, true
			}
			return "", false
		}
		if v, ok := val("--bundle"); ok {
			out = append(out, filepath.Join(v, "config.json"))
		} else if v, ok := val("-b"); ok {
			out = append(out, filepath.Join(v, "config.json"))
		} else if v, ok := val("--process"); ok {
			out = append(out, v)
		} else if v, ok := val("-p"); ok {
			out = append(out, v)
		}
	}
	return out
}

// StripFile removes every capability outside keep from the process spec in path: a bundle's
// config.json (capabilities under "process") or a bare process file. Other fields are kept as
// they are.
func StripFile(path string, keep Set) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, changed, err := Strip(data, keep)
	if err != nil || !changed {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, st.Mode().Perm())
}

// Strip is StripFile on a document.
func Strip(data []byte, keep Set) ([]byte, bool, error) {
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, err
	}
	proc := doc
	if p, ok := doc["process"].(map[string]any); ok {
		proc = p
	}
	capsObj, ok := proc["capabilities"].(map[string]any)
	if !ok {
		return data, false, nil
	}
	changed := false
	for set, v := range capsObj {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := list[:0:0]
		for _, c := range list {
			if name, _ := c.(string); name != "" && !keep[name] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		capsObj[set] = kept
	}
	if !changed {
		return data, false, nil
	}
	out, err := json.Marshal(doc)
	return out, true, err
}
