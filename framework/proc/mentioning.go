package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mentioning returns the pids of the processes, whoever started them, whose command line
// contains s: given a run directory, what of that run is still running.
func Mentioning(s string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}
