//go:build !linux

package netns

import (
	"context"
	"errors"
	"net"
	"net/netip"
)

// errUnsupported: network namespaces are a Linux feature.
var errUnsupported = errors.New("netns: network namespaces are only supported on linux")

// Do runs fn inside n; unsupported here.
func (n NS) Do(fn func() error) error { return errUnsupported }

// Listen creates a listener inside n; unsupported here.
func (n NS) Listen(network, addr string) (net.Listener, error) { return nil, errUnsupported }

// ListenPacket creates a packet socket inside n; unsupported here.
func (n NS) ListenPacket(network, addr string) (net.PacketConn, error) { return nil, errUnsupported }

// Dialer dials from inside n; unsupported here.
func (n NS) Dialer(mark bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) { return nil, errUnsupported }
}

// DialerFrom dials from inside n with a transparent source; unsupported here.
func (n NS) DialerFrom(src netip.Addr) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return n.Dialer(true)
}

// CanBindTransparent says whether transparent sockets are allowed; never here.
func CanBindTransparent() error { return errUnsupported }

// OriginalDst is where a redirected connection was headed; unsupported here.
func OriginalDst(c net.Conn) (netip.AddrPort, error) { return netip.AddrPort{}, errUnsupported }
