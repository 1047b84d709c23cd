package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"istio.io/istio/cni/pkg/config"
	"istio.io/istio/cni/pkg/iptables"
	"istio.io/istio/cni/pkg/scopes"
	dep "istio.io/istio/tools/istio-iptables/pkg/dependencies"

	"github.com/ambientmc/ambientmc/emulator/dataplane/netns/netnstest"
)

// newNS creates a fresh network namespace with lo up, held only by the returned NS's file, so
// closing it in cleanup (after the sockets in it) removes it.
func newNS(t *testing.T) NS {
	t.Helper()
	return FromFile(netnstest.New(t))
}

func listen(t *testing.T, n NS, addr string) net.Listener {
	t.Helper()
	l, err := n.Listen("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, n NS, mark bool, addr string) (net.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := n.Dialer(mark)(ctx, "tcp", addr)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func accept(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	require.NoError(t, l.(*net.TCPListener).SetDeadline(time.Now().Add(5*time.Second)))
	c, err := l.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// Do runs fn in the namespace and puts the thread back afterwards, also when fn fails or panics.
func TestDoRestoresNamespace(t *testing.T) {
	n := newNS(t)
	runtime.LockOSThread() // so "before" and "after" are the same thread
	defer runtime.UnlockOSThread()
	before := inode(t, "/proc/thread-self/ns/net")
	fi, err := n.f.Stat() // by descriptor: the file's name is a /proc/thread-self path
	require.NoError(t, err)
	target := fi.Sys().(*syscall.Stat_t).Ino
	require.NotEqual(t, before, target)

	var inside uint64
	require.NoError(t, n.Do(func() error {
		inside = inode(t, "/proc/thread-self/ns/net")
		return nil
	}))
	assert.Equal(t, target, inside, "fn did not run in the namespace")
	assert.Equal(t, before, inode(t, "/proc/thread-self/ns/net"), "not restored")

	boom := errors.New("boom")
	assert.ErrorIs(t, n.Do(func() error { return boom }), boom)
	assert.Equal(t, before, inode(t, "/proc/thread-self/ns/net"), "not restored after an error")

	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_ = n.Do(func() error { panic("boom") })
	}()
	assert.Equal(t, before, inode(t, "/proc/thread-self/ns/net"), "not restored after a panic")
}

// Sockets made by Listen, ListenPacket and Dialer live in the namespace: reachable from each other,
// not from the test's own namespace.
func TestSocketsLiveInNamespace(t *testing.T) {
	n := newNS(t)

	t.Run("tcp", func(t *testing.T) {
		l := listen(t, n, "127.0.0.1:0")
		addr := l.Addr().String()
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("listener %s reachable from the test's namespace", addr)
		}
		c, err := dial(t, n, false, addr)
		require.NoError(t, err)
		s := accept(t, l)
		_, err = c.Write([]byte("hi"))
		require.NoError(t, err)
		got := make([]byte, 2)
		_, err = io.ReadFull(s, got)
		require.NoError(t, err)
		assert.Equal(t, "hi", string(got))
	})

	t.Run("udp", func(t *testing.T) {
		pc, err := n.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { pc.Close() })
		read := func() (string, error) {
			buf := make([]byte, 16)
			require.NoError(t, pc.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
			k, _, err := pc.ReadFrom(buf)
			return string(buf[:k]), err
		}

		outside, err := net.Dial("udp", pc.LocalAddr().String())
		require.NoError(t, err)
		defer outside.Close()
		_, _ = outside.Write([]byte("outside"))
		_, err = read()
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a datagram from the test's namespace arrived")

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		inside, err := n.Dialer(false)(ctx, "udp", pc.LocalAddr().String())
		require.NoError(t, err)
		defer inside.Close()
		_, err = inside.Write([]byte("inside"))
		require.NoError(t, err)
		got, err := read()
		require.NoError(t, err)
		assert.Equal(t, "inside", got)
	})

	t.Run("host name refused", func(t *testing.T) {
		_, err := dial(t, n, false, "localhost:80")
		assert.ErrorContains(t, err, "ip:port")
	})
}

// A marked dial carries Mark on its socket; an unmarked one carries none.
func TestDialerMark(t *testing.T) {
	n := newNS(t)
	l := listen(t, n, "127.0.0.1:0")
	for _, tc := range []struct {
		mark bool
		want int
	}{{true, Mark}, {false, 0}} {
		c, err := dial(t, n, tc.mark, l.Addr().String())
		require.NoError(t, err)
		rc, err := c.(*net.TCPConn).SyscallConn()
		require.NoError(t, err)
		var got int
		var gerr error
		require.NoError(t, rc.Control(func(fd uintptr) {
			got, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK)
		}))
		require.NoError(t, gerr)
		assert.Equal(t, tc.want, got, "mark=%v", tc.mark)
	}
}

// runIn runs an iptables-style command inside n (a process forked from the switched thread
// inherits its namespace); it skips the test when the tool is missing or the kernel lacks NAT.
func runIn(t *testing.T, n NS, name string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
	var out []byte
	err := n.Do(func() (err error) {
		out, err = exec.Command(name, args...).CombinedOutput()
		return err
	})
	if err != nil {
		t.Skipf("%s %s failed, no NAT support here? %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// OriginalDst recovers where a REDIRECTed connection was headed, and a marked socket passes a
// capture rule shaped like istio-cni's (! --mark 0x539/0xfff) without being redirected.
func TestOriginalDst(t *testing.T) {
	for _, tc := range []struct {
		name, tool, listen, dst string
	}{
		{"ipv4", "iptables", "127.0.0.1:0", "127.0.0.2:9"},
		{"ipv6", "ip6tables", "[::1]:0", "[::1]:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNS(t)
			l, err := n.Listen("tcp", tc.listen)
			if err != nil && tc.name == "ipv6" {
				t.Skipf("no IPv6 loopback: %v", err)
			}
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })
			port := l.Addr().(*net.TCPAddr).Port
			runIn(t, n, tc.tool, "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "--dport", "9",
				"-m", "mark", "!", "--mark", fmt.Sprintf("0x%x/0xfff", Mark),
				"-j", "REDIRECT", "--to-ports", fmt.Sprint(port))

			_, err = dial(t, n, false, tc.dst)
			require.NoError(t, err, "redirected dial")
			got, err := OriginalDst(accept(t, l))
			require.NoError(t, err)
			assert.Equal(t, netip.MustParseAddrPort(tc.dst), got)

			// Not redirected: the original destination is the address it reached.
			_, err = dial(t, n, false, l.Addr().String())
			require.NoError(t, err)
			got, err = OriginalDst(accept(t, l))
			require.NoError(t, err)
			assert.Equal(t, l.Addr().(*net.TCPAddr).AddrPort(), got)

			// Marked: the rule lets it through to port 9, where nothing listens.
			_, err = dial(t, n, true, tc.dst)
			assert.ErrorIs(t, err, syscall.ECONNREFUSED, "marked dial was redirected")
		})
	}
}

// An application that the ztunnel reaches through DialerFrom sees the original source's address,
// and its replies find the socket: the namespace holds istio-cni's own in-pod rules, built by its
// iptables package as its node agent builds them in each ambient pod. In a twin namespace without
// them the replies leave by the pod's interface and the dial never completes.
func TestDialerFromKeepsTheOriginalSource(t *testing.T) {
	if err := CanBindTransparent(); err != nil {
		t.Skipf("no IP_TRANSPARENT here: %v", err)
	}
	// istio-cni's iptables package runs the host's iptables-save and iptables-restore (a fresh
	// host may have none: make engine's docker.io brings them).
	for _, tool := range []string{"iptables-save", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install iptables): %v", tool, err)
		}
	}
	pod := func(rules bool) (NS, net.Listener) {
		n := newNS(t)
		// The pod's interface: one end of a veth pair whose other end leads nowhere.
		runIn(t, n, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "nowhere")
		runIn(t, n, "ip", "addr", "add", "10.99.0.2/24", "dev", "eth0")
		runIn(t, n, "ip", "link", "set", "eth0", "up")
		runIn(t, n, "ip", "link", "set", "nowhere", "up")
		if rules {
			require.NoError(t, n.Do(func() error {
				cfg := &config.AmbientConfig{HostProbeSNATAddress: netip.MustParseAddr("169.254.7.127"),
					HostProbeV6SNATAddress: netip.MustParseAddr("fd16:9254:7127:1337:ffff:ffff:ffff:ffff")}
				_, inpod, err := iptables.NewIptablesConfigurator(cfg, cfg, &dep.RealDependencies{}, &dep.RealDependencies{}, iptables.RealNlDeps())
				if err != nil {
					return err
				}
				return inpod.CreateInpodRules(scopes.CNIAgent, config.PodLevelOverrides{})
			}), "istio-cni's in-pod rules")
		}
		return n, listen(t, n, "10.99.0.2:0")
	}
	src := netip.MustParseAddr("10.99.0.77")

	n, app := pod(true)
	c, err := n.DialerFrom(src)(context.Background(), "tcp", app.Addr().String())
	require.NoError(t, err, "the dial completes: the SYN-ACK to %s came back to the socket", src)
	t.Cleanup(func() { c.Close() })
	got := accept(t, app)
	assert.Equal(t, src, got.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(), "the application sees the original source")
	_, err = got.Write([]byte("reply"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, "reply", string(buf))

	bare, app := pod(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = bare.DialerFrom(src)(ctx, "tcp", app.Addr().String())
	assert.Error(t, err, "without istio-cni's rules the replies to %s do not come back", src)
}
