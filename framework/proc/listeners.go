package proc

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Listening returns the TCP addresses on which the given processes listen (this network
// namespace only), so tests can prove that nothing binds outside loopback.
func Listening(pids ...int) ([]netip.AddrPort, error) {
	inodes := map[string]bool{}
	for _, pid := range pids {
		links, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		if err != nil {
			return nil, err
		}
		for _, l := range links {
			target, err := os.Readlink(l)
			if err == nil && strings.HasPrefix(target, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
			}
		}
	}
	var out []netip.AddrPort
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			return nil, err
		}
		s := bufio.NewScanner(f)
		s.Scan() // header
		for s.Scan() {
			fields := strings.Fields(s.Text())
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			ap, err := parseProcAddr(fields[1])
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", table, err)
			}
			out = append(out, ap)
		}
		f.Close()
	}
	return out, nil
}

// parseProcAddr decodes /proc/net/tcp's "0100007F:1F90": the address as 32-bit words in host
// (little-endian) order, the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	host, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q", s)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// RunListening returns every listening socket of the processes this run started (Start) and of
// the test process itself.
func RunListening() ([]netip.AddrPort, error) {
	pids := []int{os.Getpid()}
	for _, pr := range Running() {
		pids = append(pids, pr.Pid())
	}
	return Listening(pids...)
}
