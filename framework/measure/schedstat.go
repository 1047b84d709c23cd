package measure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// SchedstatResolution is the unit of the scheduler's runtime counters: nanoseconds.
const SchedstatResolution = 1e-9

// SchedstatName is Schedstat's Name.
const SchedstatName = "schedstat"

// Schedstat is a CPUSource for a local process: the scheduler's per-thread runtime in
// nanoseconds, where process_cpu_seconds_total has 10 ms ticks.
//
// /proc/PID/schedstat is not the process's figure: fs/proc/base.c (proc_pid_schedstat) prints the
// se.sum_exec_runtime of the one task PID names, the thread group leader, and a Go process runs
// on many threads. So Schedstat sums the first field of /proc/PID/task/*/schedstat.
//
// A thread that exits takes its counter with it; Schedstat remembers the last value it read of
// each thread, so the total never falls, and loses only what a thread ran between the last read
// and its exit (Go's runtime keeps its threads, so this is rare). The kernel updates a thread's
// counter when it is switched out and at each scheduler tick, so a thread that is on a CPU at the
// moment of the read lags by at most one tick; an idle istiod is off CPU almost all the time.
type Schedstat struct {
	PID int

	mu        sync.Mutex
	startTime string         // field 22 of /proc/PID/stat: catches a reused PID
	threads   map[int]uint64 // last runtime read of each live thread, ns
	departed  uint64         // last runtime read of threads that have exited, ns
}

// NewSchedstat returns a Schedstat for pid.
func NewSchedstat(pid int) *Schedstat { return &Schedstat{PID: pid} }

// Resolution is SchedstatResolution.
func (*Schedstat) Resolution() float64 { return SchedstatResolution }

// Name says which counter this is.
func (*Schedstat) Name() string { return SchedstatName }

// CPUSeconds sums the runtime of the process's threads, the departed ones included.
func (s *Schedstat) CPUSeconds(context.Context) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start, err := processStartTime(s.PID)
	if err != nil {
		return 0, err
	}
	if s.startTime == "" {
		s.startTime = start
		s.threads = map[int]uint64{}
	} else if start != s.startTime {
		return 0, fmt.Errorf("process %d was restarted or its PID reused (start time %s, first read %s)", s.PID, start, s.startTime)
	}
	dir := fmt.Sprintf("/proc/%d/task", s.PID)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	seen := make(map[int]uint64, len(entries))
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ns, err := readRuntime(fmt.Sprintf("%s/%d/schedstat", dir, tid))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // exited since ReadDir: counted as departed below
		}
		if err != nil {
			return 0, err
		}
		seen[tid] = ns
	}
	if len(seen) == 0 {
		return 0, fmt.Errorf("process %d has no readable threads in %s", s.PID, dir)
	}
	for tid, last := range s.threads {
		if ns, ok := seen[tid]; !ok || ns < last {
			// Gone, or a new thread that reused the ID: the old one's time stays counted.
			s.departed += last
		}
	}
	s.threads = seen
	total := s.departed
	for _, ns := range seen {
		total += ns
	}
	return float64(total) * SchedstatResolution, nil
}

// readRuntime reads the first field of a schedstat file: time spent on a CPU, in nanoseconds.
func readRuntime(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, fmt.Errorf("%s: unexpected content %q", path, strings.TrimSpace(string(b)))
	}
	ns, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return ns, nil
}

// processStartTime is field 22 of /proc/PID/stat, counted after the parenthesised command name,
// which may hold spaces.
func processStartTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	return f[19], nil
}
