// Command nodecost says where idle kind nodes' CPU and memory go: every process in each kind node
// container on this host, read from this host's /proc twice -window apart, grouped by program
// (kubelet, containerd, kube-apiserver, etcd, pilot-discovery, ...), with each node's total, the
// mean node, and how busy the host was over the same window. Run it while a kept run's clusters
// (-keep) sit idle, every join done.
//
//	go run ./scripts/nodecost -window=60s
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on Linux).
const clockTicks = 100

func main() {
	window := flag.Duration("window", time.Minute, "how long between the two readings")
	flag.Parse()
	if err := run(*window); err != nil {
		fmt.Fprintln(os.Stderr, "nodecost:", err)
		os.Exit(1)
	}
}

// proc is one process as read: its node, program, CPU time and resident memory.
type proc struct {
	node, program string
	cpuTicks      uint64
	rssKiB        uint64
}

func run(window time.Duration) error {
	nodes, err := kindNodes()
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no kind node container runs (label io.x-k8s.kind.cluster): keep a run's clusters with -keep first")
	}
	busy0, total0, err := hostCPU()
	if err != nil {
		return err
	}
	first := readProcs(nodes)
	fmt.Fprintf(os.Stderr, "nodecost: %d nodes, %d processes; reading again in %s\n", len(nodes), len(first), window)
	time.Sleep(window)
	busy1, total1, err := hostCPU()
	if err != nil {
		return err
	}
	second := readProcs(nodes)
	secs := window.Seconds()
	type row struct {
		procs  int
		cpuMs  float64 // per second of the window
		rssMiB float64
	}
	byNode := map[string]map[string]*row{}
	for pid, p := range second {
		if byNode[p.node] == nil {
			byNode[p.node] = map[string]*row{}
		}
		r := byNode[p.node][p.program]
		if r == nil {
			r = &row{}
			byNode[p.node][p.program] = r
		}
		r.procs++
		r.rssMiB += float64(p.rssKiB) / 1024
		if q, ok := first[pid]; ok && q.program == p.program && p.cpuTicks >= q.cpuTicks {
			r.cpuMs += float64(p.cpuTicks-q.cpuTicks) / clockTicks * 1000 / secs
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range byNode {
			if !yield(n) {
				return
			}
		}
	})
	mean := map[string]*row{}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	table := func(title string, rows map[string]*row, div float64) {
		fmt.Fprintf(w, "%s\tprocesses\tCPU ms/s\tRSS MiB\t\n", title)
		progs := make([]string, 0, len(rows))
		for p := range rows {
			progs = append(progs, p)
		}
		sort.Slice(progs, func(i, j int) bool { return rows[progs[i]].cpuMs > rows[progs[j]].cpuMs })
		var t row
		for _, p := range progs {
			r := rows[p]
			fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.0f\t\n", p, float64(r.procs)/div, r.cpuMs/div, r.rssMiB/div)
			t.procs += r.procs
			t.cpuMs += r.cpuMs
			t.rssMiB += r.rssMiB
		}
		fmt.Fprintf(w, "total\t%.1f\t%.1f\t%.0f\t\n\t\t\t\t\n", float64(t.procs)/div, t.cpuMs/div, t.rssMiB/div)
	}
	for _, n := range names {
		table(n, byNode[n], 1)
		for p, r := range byNode[n] {
			m := mean[p]
			if m == nil {
				m = &row{}
				mean[p] = m
			}
			m.procs += r.procs
			m.cpuMs += r.cpuMs
			m.rssMiB += r.rssMiB
		}
	}
	table(fmt.Sprintf("mean of %d nodes", len(names)), mean, float64(len(names)))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Printf("host: %.0f%% busy over the %s window (%d CPUs)\n", 100*float64(busy1-busy0)/float64(total1-total0), window, cpus())
	return nil
}

// kindNodes are the running kind node containers: full ID to name.
func kindNodes() (map[string]string, error) {
	out, err := exec.CommandContext(context.Background(), "docker", "ps", "--no-trunc", "--filter", "label=io.x-k8s.kind.cluster", "--format", "{{.ID}} {{.Names}}").Output()
	if err != nil {
		return nil, fmt.Errorf("docker ps: %w", err)
	}
	nodes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if id, name, ok := strings.Cut(line, " "); ok {
			nodes[id] = name
		}
	}
	return nodes, nil
}

// readProcs reads every process of this host that runs in one of nodes (its cgroup path names the
// container), by pid.
func readProcs(nodes map[string]string) map[int]proc {
	out := map[int]proc{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(filepath.Join(d, "cgroup"))
		if err != nil {
			continue
		}
		node := ""
		for id, name := range nodes {
			if strings.Contains(string(cg), id) {
				node = name
				break
			}
		}
		if node == "" {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// comm is in parentheses and may hold spaces; the fields after it are fixed.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseUint(f[11], 10, 64)
		stime, _ := strconv.ParseUint(f[12], 10, 64)
		out[pid] = proc{node: node, program: program(s[open+1 : end]), cpuTicks: utime + stime, rssKiB: rssKiB(filepath.Join(d, "status"))}
	}
	return out
}

// program names a process's comm as the tables group it: containerd's shims and kube's truncated
// names in full.
func program(comm string) string {
	switch {
	case strings.HasPrefix(comm, "containerd-shim"):
		return "containerd-shim"
	case comm == "kube-controller":
		return "kube-controller-manager"
	}
	return comm
}

func rssKiB(status string) uint64 {
	f, err := os.Open(status)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// hostCPU reads /proc/stat's cpu line: busy and total ticks.
func hostCPU() (busy, total uint64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	for i, v := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

func cpus() int {
	data, _ := os.ReadFile("/proc/stat")
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "cpu") && len(l) > 3 && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	return n
}
