package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. sysconf(_SC_CLK_TCK) is
// 100 on every Linux architecture Go supports; it is fixed by the kernel ABI, not by CONFIG_HZ.
const clockTicks = 100

// RSSBytes returns the resident set size (VmRSS in /proc/<pid>/status) of the process itself,
// not of its group.
func (p *Process) RSSBytes() (uint64, error) {
	return readProc(p, "status", parseVmRSS)
}

// CPUSeconds returns the user plus system CPU time the process itself has used (utime+stime in
// /proc/<pid>/stat, in clock ticks of 1/100 s), not counting its children.
func (p *Process) CPUSeconds() (float64, error) {
	ticks, err := readProc(p, "stat", parseStatTicks)
	return float64(ticks) / clockTicks, err
}

// readProc parses /proc/<pid>/<file> of the process; errors name it. It refuses after the exit:
// the pid may already belong to someone else.
func readProc[T any](p *Process, file string, parse func(string) (T, error)) (T, error) {
	var zero T
	select {
	case <-p.done:
		return zero, fmt.Errorf("%s has exited", p.Name())
	default:
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p.pid, file))
	if err != nil {
		return zero, fmt.Errorf("%s: %w", p.Name(), err)
	}
	v, err := parse(string(b))
	if err != nil {
		return zero, fmt.Errorf("%s: %w", p.Name(), err)
	}
	return v, nil
}

// parseVmRSS reads the "VmRSS:  1234 kB" line of /proc/<pid>/status.
func parseVmRSS(status string) (uint64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", strings.TrimSpace(line))
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmRSS line %q: %w", strings.TrimSpace(line), err)
		}
		return kb * 1024, nil
	}
	// Zombies and kernel threads have no VmRSS line.
	return 0, fmt.Errorf("no VmRSS in status")
}

// parseStatTicks returns utime+stime from /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so fields are counted after the last ')'.
func parseStatTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so utime (field 14) is f[11] and stime (field 15) is f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat stime: %w", err)
	}
	return utime + stime, nil
}

// RSSFileBytes returns the file-backed part of the RSS (RssFile in /proc/<pid>/status): mostly the
// binary's pages, which the page cache holds once for every process running that binary.
func (p *Process) RSSFileBytes() (uint64, error) {
	return readProc(p, "status", parseRssFile)
}

// parseRssFile reads the "RssFile:  1234 kB" line of /proc/<pid>/status.
func parseRssFile(status string) (uint64, error) {
	for line := range strings.Lines(status) {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			if f := strings.Fields(rest); len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseUint(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no RssFile in status")
}
