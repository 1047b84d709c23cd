package proc

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Conn is one connected socket of a process, as the kernel's socket tables show it.
type Conn struct {
	Pid           int
	Proto         string // tcp, tcp6, udp, udp6
	Local, Remote netip.AddrPort
	State         string // the table's hex state, e.g. 01 (established), 02 (SYN sent)
}

func (c Conn) String() string {
	return fmt.Sprintf("pid %d %s %s -> %s (state %s)", c.Pid, c.Proto, c.Local, c.Remote, c.State)
}

// socketTables are the kernel's tables of this network namespace.
var socketTables = []string{"tcp", "tcp6", "udp", "udp6"}

// tableEntry is one connected socket of a table, not yet matched to a process.
type tableEntry struct {
	Conn
	inode string
}

// readTables returns every connected socket of this network namespace from /proc/net: every TCP
// socket that is not listening, every UDP socket with a peer, whoever holds it. The watch reads
// them where the kernel has no socket diagnostics (diagTables).
func readTables() ([]tableEntry, error) {
	var out []tableEntry
	for _, proto := range socketTables {
		f, err := os.Open("/proc/net/" + proto)
		if err != nil {
			return nil, err
		}
		entries, err := parseTable(f, proto)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("/proc/net/%s: %w", proto, err)
		}
		out = append(out, entries...)
	}
	return out, nil
}

// parseTable reads one /proc/net table's connected sockets.
func parseTable(r io.Reader, proto string) ([]tableEntry, error) {
	var out []tableEntry
	s := bufio.NewScanner(r)
	s.Scan() // header
	for s.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(s.Text())
		if len(f) < 10 || (strings.HasPrefix(proto, "tcp") && f[3] == "0A") {
			continue
		}
		local, err := parseProcAddr(f[1])
		if err != nil {
			return nil, err
		}
		remote, err := parseProcAddr(f[2])
		if err != nil {
			return nil, err
		}
		if remote.Port() == 0 && remote.Addr().IsUnspecified() {
			continue // an unconnected UDP socket
		}
		out = append(out, tableEntry{Conn{Proto: proto, Local: local, Remote: remote, State: f[3]}, f[9]})
	}
	return out, s.Err()
}

// offLoopbackOf keeps the entries whose peer is not on loopback and that one of pids holds,
// attributed to it. Only then are the processes' descriptors read: at 50 clusters a hundred
// processes hold thousands (etcd alone about 50 a cluster), and a watch samples four times a second.
// (sock_diag's entries are off loopback already; the check costs nothing there.)
func offLoopbackOf(entries []tableEntry, pids []int) []Conn {
	var off []tableEntry
	for _, e := range entries {
		if !e.Remote.Addr().Unmap().IsLoopback() {
			off = append(off, e)
		}
	}
	if len(off) == 0 {
		return nil
	}
	owner := socketOwners(pids)
	var out []Conn
	for _, e := range off {
		if pid, ok := owner[e.inode]; ok {
			c := e.Conn
			c.Pid = pid
			out = append(out, c)
		}
	}
	return out
}

// socketOwners maps socket inodes to the pid holding them; a process that exited meanwhile is
// skipped.
func socketOwners(pids []int) map[string]int {
	owner := map[string]int{}
	for _, pid := range pids {
		links, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, "socket:[") {
				owner[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = pid
			}
		}
	}
	return owner
}

// ConnWatch samples the socket tables and keeps the connections of this process and of every
// process Start started whose peer is not on loopback.
type ConnWatch struct {
	stop chan struct{}
	done chan struct{}

	// read reads the tables: the kernel's socket diagnostics, filtered to peers off loopback, or
	// /proc/net's tables whole where those fail (source says which).
	read   func() ([]tableEntry, error)
	source string

	mu       sync.Mutex
	samples  int
	seen     int // sockets read over all samples, any process's (only those off loopback from sock_diag)
	offLoop  []Conn
	lastErr  error
	procSeen map[int]string
}

// Where the watch reads the sockets from (ConnReport.Source).
const (
	SourceSockDiag = "sock_diag, filtered in the kernel to peers off loopback"
	SourceProcNet  = "/proc/net/{tcp,tcp6,udp,udp6}, every connected socket"
)

// WatchConnections starts sampling every interval until Stop.
func WatchConnections(every time.Duration) *ConnWatch {
	w := &ConnWatch{stop: make(chan struct{}), done: make(chan struct{}), procSeen: map[int]string{}, read: diagTables, source: SourceSockDiag}
	if _, err := diagTables(); err != nil { // no inet_diag in this kernel
		w.read, w.source = readTables, SourceProcNet
	}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-w.stop:
				w.sample()
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *ConnWatch) sample() {
	pids := []int{os.Getpid()}
	names := map[int]string{os.Getpid(): "test process"}
	for _, p := range Running() {
		pids = append(pids, p.Pid())
		names[p.Pid()] = p.Name()
	}
	entries, err := w.read()
	off := offLoopbackOf(entries, pids)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	for pid, n := range names {
		w.procSeen[pid] = n
	}
	if err != nil {
		w.lastErr = err
		return
	}
	w.seen += len(entries)
	for _, c := range off {
		if !slices.Contains(w.offLoop, c) {
			w.offLoop = append(w.offLoop, c)
		}
	}
}

// ConnReport is what a watch saw.
type ConnReport struct {
	// Connections counts the sockets read over all samples, any process's: every connected one
	// from /proc/net, only those off loopback from sock_diag (Source).
	Samples, Connections, Processes int
	Source                          string
	// OffLoopback are the connections whose peer was not on loopback, each once.
	OffLoopback []Conn
	// Names names the processes by pid.
	Names map[int]string
	Err   error
}

// Stop takes a last sample and returns what the watch saw.
func (w *ConnWatch) Stop() ConnReport {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return ConnReport{Samples: w.samples, Connections: w.seen, Processes: len(w.procSeen), Source: w.source,
		OffLoopback: slices.Clone(w.offLoop), Names: w.procSeen, Err: w.lastErr}
}
