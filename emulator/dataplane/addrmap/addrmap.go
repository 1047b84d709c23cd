// Package addrmap is where the emulated data plane meets the local address plan: pod addresses
// are API data only (10.(10+i).a.b, which an EndpointSlice accepts) and each is served on its
// loopback twin (127.(10+i).a.b, topology.LoopbackOf). Every listen and dial of the data plane,
// the probe servers and the API servers' egress proxy goes through here and fails closed: an
// address that is neither loopback nor a pod address of the plan is an error, never a connection.
package addrmap

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/ambientmc/ambientmc/topology"
)

// Socket returns the loopback address that serves a: a itself when it is loopback, its twin when
// it is a pod address of the plan.
func Socket(a netip.Addr) (netip.Addr, error) {
	a = a.Unmap()
	if a.IsLoopback() {
		return a, nil
	}
	if l, ok := topology.LoopbackOf(a); ok {
		return l, nil
	}
	return netip.Addr{}, fmt.Errorf("addrmap: %s is neither loopback nor a pod address of the local plan: refusing it, traffic stays on loopback", a)
}

// SocketAddr is Socket for a host:port; the host must be an IP literal (a name could resolve
// anywhere).
func SocketAddr(hostport string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("addrmap: %q is not IP:port (names are refused: they could resolve off loopback)", hostport)
	}
	a, err := Socket(ap.Addr())
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a, ap.Port()), nil
}

// Dial connects to address's socket over TCP.
func Dial(ctx context.Context, network, address string) (net.Conn, error) {
	if err := checkNetwork(network); err != nil {
		return nil, err
	}
	ap, err := SocketAddr(address)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", ap.String())
}

// Listen listens on address's socket over TCP.
func Listen(network, address string) (net.Listener, error) {
	if err := checkNetwork(network); err != nil {
		return nil, err
	}
	ap, err := SocketAddr(address)
	if err != nil {
		return nil, err
	}
	return net.Listen("tcp", ap.String())
}

func checkNetwork(network string) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
		return nil
	}
	return fmt.Errorf("addrmap: network %q: only TCP is mapped", network)
}
