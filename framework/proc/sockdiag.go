package proc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel's socket diagnostics (sock_diag, what ss reads), asked only for the sockets whose peer
// is off loopback: the kernel walks its tables and filters, and returns nothing when nothing left
// loopback. Reading /proc/net/tcp instead formats every socket as text for the reader to parse,
// and at a hundred local clusters that was thousands of lines four times a second.

// The kernel's constants and layouts (linux/inet_diag.h, linux/netlink.h).
const (
	inetDiagReqBytecode = 1 // INET_DIAG_REQ_BYTECODE
	bcJump              = 1 // INET_DIAG_BC_JMP
	bcDestCond          = 8 // INET_DIAG_BC_D_COND
	tcpEstablished      = 1
	tcpClose            = 7
	tcpListen           = 10
	diagReqLen          = 56 // struct inet_diag_req_v2
	diagMsgLen          = 72 // struct inet_diag_msg
	nlmsgHdrLen         = 16
)

// diagQuery is one table to ask for: a family and protocol, the states that mean connected.
type diagQuery struct {
	proto   string // as /proc/net names the table
	family  uint8
	ipProto uint8
	states  uint32
}

// Every TCP state but listening and closed (a dial in progress counts); UDP only connected.
var diagQueries = []diagQuery{
	{"tcp", unix.AF_INET, unix.IPPROTO_TCP, ^uint32(1<<tcpListen | 1<<tcpClose)},
	{"tcp6", unix.AF_INET6, unix.IPPROTO_TCP, ^uint32(1<<tcpListen | 1<<tcpClose)},
	{"udp", unix.AF_INET, unix.IPPROTO_UDP, 1 << tcpEstablished},
	{"udp6", unix.AF_INET6, unix.IPPROTO_UDP, 1 << tcpEstablished},
}

// notLoopback is the filter: a socket passes when its peer is in none of 127.0.0.0/8 (IPv4, and
// IPv4-mapped on IPv6 sockets, which the kernel matches against an IPv4 condition) and ::1.
func notLoopback(family uint8) []byte {
	conds := [][]byte{hostCond(unix.AF_INET, 8, []byte{127, 0, 0, 0})}
	if family == unix.AF_INET6 {
		conds = append(conds, hostCond(unix.AF_INET6, 128, netip.IPv6Loopback().AsSlice()))
	}
	// Each "not": the condition, then a jump. A match falls through to the jump, which leaves
	// the program (reject); a miss steps over it to the next "not", or to the end (accept).
	var out []byte
	for i, c := range conds {
		rest := 0
		for _, later := range conds[i+1:] {
			rest += len(later) + 4
		}
		cond := op(bcDestCond, len(c), len(c)+4)
		jump := op(bcJump, 4, 8+rest)
		out = append(append(append(out, cond...), c[4:]...), jump...)
	}
	return out
}

// hostCond is an INET_DIAG_BC_D_COND op with its struct inet_diag_hostcond (any port); its op
// header's jumps are set by the caller.
func hostCond(family uint8, prefix int, addr []byte) []byte {
	b := make([]byte, 4+8, 4+8+len(addr))
	b[4], b[5] = family, uint8(prefix)
	binary.NativeEndian.PutUint32(b[8:], 0xffffffff) // port -1
	return append(b, addr...)
}

// op is a struct inet_diag_bc_op: code, the jump when the condition holds, the one when not.
func op(code uint8, yes, no int) []byte {
	b := []byte{code, uint8(yes), 0, 0}
	binary.NativeEndian.PutUint16(b[2:], uint16(no))
	return b
}

// diagTables returns every socket of this network namespace whose peer is off loopback.
func diagTables() ([]tableEntry, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, os.NewSyscallError("socket(NETLINK_SOCK_DIAG)", err)
	}
	defer unix.Close(fd)
	var out []tableEntry
	for seq, q := range diagQueries {
		entries, err := dump(fd, uint32(seq+1), q)
		if err != nil {
			return nil, fmt.Errorf("sock_diag %s: %w", q.proto, err)
		}
		out = append(out, entries...)
	}
	return out, nil
}

// dump sends one filtered dump request and reads its answer.
func dump(fd int, seq uint32, q diagQuery) ([]tableEntry, error) {
	bc := notLoopback(q.family)
	attrLen := 4 + len(bc)
	msgLen := nlmsgHdrLen + diagReqLen + attrLen
	req := make([]byte, msgLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(msgLen))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], seq)
	r := req[nlmsgHdrLen:]
	r[0], r[1] = q.family, q.ipProto
	ne.PutUint32(r[4:], q.states)
	a := r[diagReqLen:]
	ne.PutUint16(a[0:], uint16(attrLen))
	ne.PutUint16(a[2:], inetDiagReqBytecode)
	copy(a[4:], bc)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto", err)
	}
	var out []tableEntry
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, os.NewSyscallError("recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := int32(ne.Uint32(m.Data)); errno != 0 {
						return nil, unix.Errno(-errno)
					}
				}
				return nil, errors.New("netlink error without an errno")
			}
			if e, ok := parseDiagMsg(m.Data, q.proto); ok {
				out = append(out, e)
			}
		}
	}
}

// parseDiagMsg reads a struct inet_diag_msg; an unspecified peer is no connection.
func parseDiagMsg(b []byte, proto string) (tableEntry, bool) {
	if len(b) < diagMsgLen {
		return tableEntry{}, false
	}
	family := b[0]
	// struct inet_diag_sockid at 4: ports big-endian, then source and destination, 16 bytes each.
	sport, dport := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:])
	addr := func(a []byte) netip.Addr {
		if family == unix.AF_INET {
			return netip.AddrFrom4([4]byte(a[:4]))
		}
		return netip.AddrFrom16([16]byte(a[:16]))
	}
	local, remote := addr(b[8:24]), addr(b[24:40])
	if remote.IsUnspecified() {
		return tableEntry{}, false
	}
	inode := binary.NativeEndian.Uint32(b[68:])
	state := fmt.Sprintf("%02X", b[1])
	return tableEntry{Conn{Proto: proto, Local: netip.AddrPortFrom(local, sport), Remote: netip.AddrPortFrom(remote, dport), State: state},
		strconv.FormatUint(uint64(inode), 10)}, true
}
