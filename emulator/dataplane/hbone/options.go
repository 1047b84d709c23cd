package hbone

import (
	"context"
	"net"
	"time"
)

// DialFunc opens the TCP connection of an outer hop (net.Dialer.DialContext's shape).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// ClientOption changes a Client.
type ClientOption func(*Client)

// DefaultPoolIdleTimeout is how long a pooled outer connection with no stream stays open: ztunnel's
// pool lets go of a connection no one asked for in 5 minutes (src/config.rs
// DEFAULT_POOL_UNUSED_RELEASE_TIMEOUT).
const DefaultPoolIdleTimeout = 5 * time.Minute

// WithPoolIdleTimeout closes a pooled outer connection d after its last stream ended.
func WithPoolIdleTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.t2.IdleConnTimeout = d }
}

// WithDialer makes the client open its TCP connections with d (default: a net.Dialer).
func WithDialer(d DialFunc) ClientOption { return func(c *Client) { c.dial = d } }
