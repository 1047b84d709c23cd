package netns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Do runs fn on the calling goroutine's OS thread switched into n, then switches the thread back.
// Network namespaces belong to threads, not processes, so fn must not hand socket creation to
// other goroutines: they run on other threads, in the process's namespace. If the thread cannot be
// switched back it stays locked, so Go ends it with the goroutine instead of reusing it in the
// wrong namespace.
func (n NS) Do(fn func() error) (err error) {
	if n.f == nil {
		return errors.New("netns: no namespace file")
	}
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: current namespace: %w", err)
	}
	defer orig.Close()
	if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: enter %s: %w", n.f.Name(), err)
	}
	// Deferred so a panicking fn still restores the thread.
	defer func() {
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
			err = errors.Join(err, fmt.Errorf("netns: return from %s (thread left locked to be discarded): %w", n.f.Name(), serr))
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// Listen creates a stream listener inside n, e.g. ztunnel's 15001/15006/15008 listeners of a pod.
// The socket keeps n's namespace, so Accept and the accepted connections work from any goroutine.
func (n NS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return orClose(l, err)
}

// ListenPacket creates a packet socket (UDP) inside n, e.g. ztunnel's DNS proxy port of a pod.
func (n NS) ListenPacket(network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := n.Do(func() (err error) {
		c, err = net.ListenPacket(network, addr)
		return err
	})
	return orClose(c, err)
}

// orClose returns c, or closes it when Do failed after c was made (the thread could not leave n).
func orClose[C io.Closer](c C, err error) (C, error) {
	if err != nil {
		var zero C
		if any(c) != nil {
			c.Close()
		}
		return zero, err
	}
	return c, nil
}

// Dialer returns a dial function whose sockets are created inside n, as ztunnel dials out of a
// pod. With mark, sockets carry Mark (set before connect) so the pod's capture rules let them
// pass instead of redirecting them back to ztunnel. addr must be an ip:port: a host name would be
// resolved, and possibly dialed (happy eyeballs), by other goroutines outside n.
func (n NS) Dialer(mark bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{}
	if mark {
		d.Control = setMark
	}
	return n.dialWith(d)
}

// dialWith dials with d from inside n.
func (n NS) dialWith(d net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if _, err := netip.ParseAddrPort(addr); err != nil {
			return nil, fmt.Errorf("netns: dial %s: need an ip:port: %w", addr, err)
		}
		// Go creates and connects the socket on the calling goroutine, so the whole dial runs in n.
		var c net.Conn
		err := n.Do(func() (err error) {
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return orClose(c, err)
	}
}

// DialerFrom is Dialer(true) with every socket bound to src before it connects, with
// IP_TRANSPARENT so that src need not be one of n's addresses: ztunnel connects to a pod's
// application from the address the connection came from (its "original source"), and istio-cni's
// in-pod rules route the application's replies back to the socket (the mark 0x539 becomes the
// connection mark 0x111, which the replies get back and which a routing rule sends to lo).
func (n NS) DialerFrom(src netip.Addr) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{
		LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)),
		// Called before the bind: a foreign address binds only with IP_TRANSPARENT set.
		Control: func(network, address string, rc syscall.RawConn) error {
			if err := setMark(network, address, rc); err != nil {
				return err
			}
			return setTransparent(rc, src.Is6())
		},
	}
	return n.dialWith(d)
}

// CanBindTransparent says whether this process may set IP_TRANSPARENT (CAP_NET_ADMIN), as
// ztunnel decides at start whether it connects to applications from the original source.
func CanBindTransparent() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_TRANSPARENT, 1); err != nil {
		return fmt.Errorf("netns: set IP_TRANSPARENT: %w", err)
	}
	return nil
}

func setTransparent(rc syscall.RawConn, v6 bool) error {
	if v6 {
		return setsockoptInt(rc, unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1, "IPV6_TRANSPARENT")
	}
	return setsockoptInt(rc, unix.SOL_IP, unix.IP_TRANSPARENT, 1, "IP_TRANSPARENT")
}

func setMark(_, _ string, rc syscall.RawConn) error {
	return setsockoptInt(rc, unix.SOL_SOCKET, unix.SO_MARK, Mark, "SO_MARK")
}

// setsockoptInt sets one integer option on rc's socket, naming it in the error.
func setsockoptInt(rc syscall.RawConn, level, opt, value int, name string) error {
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, value) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("netns: set %s: %w", name, serr)
	}
	return nil
}

// ip6tSoOriginalDst is IP6T_SO_ORIGINAL_DST (linux/netfilter_ipv6/ip6_tables.h), absent from x/sys.
const ip6tSoOriginalDst = 80

// OriginalDst returns where a TCP connection that an iptables REDIRECT delivered was headed before
// the redirect (SO_ORIGINAL_DST, read from conntrack), as ztunnel learns the destination of traffic
// it captured. For a connection that was not redirected it returns the local address.
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("netns: original destination: %T has no socket", c)
	}
	la, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("netns: original destination: %v is not TCP", c.LocalAddr())
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	// An IPv4 connection, also one accepted on a dual-stack socket, is asked at the IP level.
	v4 := la.AddrPort().Addr().Unmap().Is4()
	level, opt := unix.SOL_IPV6, ip6tSoOriginalDst
	if v4 {
		level, opt = unix.SOL_IP, unix.SO_ORIGINAL_DST
	}
	var sa [unix.SizeofSockaddrInet6]byte // sockaddr_in or sockaddr_in6
	var serr error
	if err := rc.Control(func(fd uintptr) {
		size := uint32(len(sa))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(opt),
			uintptr(unsafe.Pointer(&sa[0])), uintptr(unsafe.Pointer(&size)), 0)
		if e != 0 {
			serr = e
		}
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("netns: SO_ORIGINAL_DST: %w", serr)
	}
	port := binary.BigEndian.Uint16(sa[2:4])
	if v4 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port), nil
	}
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(sa[8:24])), port), nil
}
