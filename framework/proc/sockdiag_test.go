package proc

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// offLoopbackPeer is TEST-NET-2 (RFC 5737): a UDP socket connected there sends nothing, but the
// kernel's tables show its peer as any connection's.
const offLoopbackPeer = "198.51.100.7:9"

// The kernel's filter keeps a socket whose peer is off loopback, IPv4 and IPv4-mapped on an IPv6
// socket, and leaves out loopback connections of both families.
func TestDiagTablesKeepOnlyPeersOffLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	loop, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer loop.Close()
	udp4, err := net.Dial("udp4", offLoopbackPeer)
	require.NoError(t, err)
	defer udp4.Close()
	mappedLoop := dialMapped(t, [4]byte{127, 0, 0, 9})
	mappedOff := dialMapped(t, [4]byte{198, 51, 100, 8})
	v6loop, err := net.Dial("udp6", "[::1]:9")
	if err != nil {
		t.Logf("no IPv6 loopback here: %v", err)
	} else {
		defer v6loop.Close()
	}

	got, err := diagTables()
	require.NoError(t, err, "this host's kernel answers sock_diag")
	want := netip.MustParseAddrPort(offLoopbackPeer)
	var found, foundMapped bool
	for _, e := range got {
		assert.False(t, e.Remote.Addr().Unmap().IsLoopback(), "a loopback peer passed the filter: %v", e)
		assert.NotEqual(t, mappedLoop, e.Local.Port(), "the v4-mapped loopback peer passed the filter: %v", e)
		if e.Remote == want && e.Proto == "udp" {
			found = true
			assert.Equal(t, udp4.LocalAddr().(*net.UDPAddr).AddrPort().Port(), e.Local.Port())
			assert.NotEqual(t, "0", e.inode)
		}
		if e.Proto == "udp6" && e.Local.Port() == mappedOff {
			foundMapped = true
			assert.Equal(t, netip.MustParseAddr("::ffff:198.51.100.8"), e.Remote.Addr())
		}
	}
	assert.True(t, found, "the socket connected to %s is in the answer: %v", offLoopbackPeer, got)
	assert.True(t, foundMapped, "the IPv6 socket connected to a v4-mapped peer off loopback is in the answer: %v", got)
}

// dialMapped connects a dual-stack IPv6 UDP socket to a v4-mapped address (Go's dialer would
// use an IPv4 socket) and returns its local port.
func dialMapped(t *testing.T, v4 [4]byte) uint16 {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0))
	to := &unix.SockaddrInet6{Port: 9}
	to.Addr = netip.AddrFrom4(v4).As16()
	mapped := netip.AddrFrom16(to.Addr)
	require.NoError(t, unix.Connect(fd, to), "connecting to %s", mapped)
	sa, err := unix.Getsockname(fd)
	require.NoError(t, err)
	return uint16(sa.(*unix.SockaddrInet6).Port)
}

// A watch on sock_diag attributes a socket of this process whose peer is off loopback to it.
func TestWatchFindsThisProcessOffLoopback(t *testing.T) {
	w := WatchConnections(20 * time.Millisecond)
	c, err := net.Dial("udp4", offLoopbackPeer)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	c.Close()
	r := w.Stop()
	require.NoError(t, r.Err)
	assert.Equal(t, SourceSockDiag, r.Source)
	require.Len(t, r.OffLoopback, 1, "%v", r.OffLoopback)
	assert.Equal(t, os.Getpid(), r.OffLoopback[0].Pid)
	assert.Equal(t, netip.MustParseAddrPort(offLoopbackPeer), r.OffLoopback[0].Remote)
}

// What one sample costs by either source, with no connections open and with 2000 on loopback
// (4000 sockets): `go test -run NONE -bench SocketTables ./framework/proc`.
func BenchmarkSocketTables(b *testing.B) {
	sources := []struct {
		name string
		read func() ([]tableEntry, error)
	}{{"procnet", readTables}, {"sockdiag", diagTables}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	open := 0
	for _, n := range []int{0, 2000} {
		for ; open < n; open++ {
			c, err := net.Dial("tcp", l.Addr().String())
			require.NoError(b, err)
			defer c.Close()
		}
		for _, src := range sources {
			b.Run(fmt.Sprintf("%s/connections=%d", src.name, n), func(b *testing.B) {
				for b.Loop() {
					if _, err := src.read(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
