package hbone

import (
	"context"
	"net"
)

// DialFunc opens the TCP connection of an outer hop (net.Dialer.DialContext's shape).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// ClientOption changes a Client.
type ClientOption func(*Client)

// WithDialer makes the client open its TCP connections with d (default: a net.Dialer).
func WithDialer(d DialFunc) ClientOption { return func(c *Client) { c.dial = d } }
