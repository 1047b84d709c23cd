package hbone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// Target is one HBONE hop.
type Target struct {
	// Addr is where to dial: podIP:15008, or gatewayIP:15008 for the outer hop.
	Addr string
	// Authority is the CONNECT :authority: podIP:port for HBONE,
	// svc-hostname:port for both hops of double HBONE.
	Authority string
	// TLS is the client mTLS config for this hop (pki.ClientConfig with the
	// source certificate and the peer SANs this hop accepts).
	TLS *tls.Config
	// PoolKey groups outer connections: dials with the same key share one
	// HTTP/2 connection until it has 100 streams (ztunnel pools by source
	// identity, destination SANs, source IP and destination address). Empty
	// means Addr. Unused for the inner hop, which is never pooled.
	PoolKey string
	// Headers are sent on the CONNECT (Forwarded, Baggage, X-Forwarded-Network).
	Headers http.Header
}

// ClientStats are a Client's cumulative counters.
type ClientStats struct {
	// OuterConnsDialed counts pooled mTLS connections opened (TCP + TLS + h2).
	OuterConnsDialed int64
	// InnerConnsDialed counts double-HBONE inner TLS + h2 connections opened.
	InnerConnsDialed int64
	// Streams counts CONNECT requests answered 200, outer and inner alike.
	Streams int64
	// Refused counts CONNECT requests answered with another status.
	Refused int64
	// Errors counts dials that failed for any other reason.
	Errors int64
}

// Client opens HBONE streams, pooling outer connections by Target.PoolKey.
type Client struct {
	t2   *http2.Transport
	dial DialFunc

	mu      sync.Mutex
	pools   map[string][]*outerConn
	dialing map[string]*dialCall
	closed  bool

	outerDialed, innerDialed, streams, refused, errs atomic.Int64
}

// outerConn is one pooled connection; active counts streams not yet closed by
// the caller, capped like ztunnel's pool independently of the server's limit.
type outerConn struct {
	cc     *http2.ClientConn
	tc     *tls.Conn // what cc runs on, for the cause of its end (closedCause)
	local  net.Addr
	active int
}

// dialCall lets concurrent dials for one key wait for a single connection.
type dialCall struct {
	done chan struct{}
	err  error
}

// NewClient returns a Client with ztunnel's HTTP/2 sizing.
func NewClient(opts ...ClientOption) *Client {
	// The http.Transport only carries HTTP2Config to the x/net transport,
	// which has no fields of its own for receive windows.
	t1 := &http.Transport{HTTP2: h2Config()}
	t2, err := http2.ConfigureTransports(t1)
	if err != nil {
		// Only fails when t1 already speaks h2, which a fresh one does not.
		panic(fmt.Sprintf("hbone: configure HTTP/2 transport: %v", err))
	}
	t2.MaxReadFrameSize = maxFrameSize
	// Closed DefaultPoolIdleTimeout after its last stream ended: ztunnel's release of a
	// connection no one asked for, the same for every connection without a long-lived stream.
	t2.IdleConnTimeout = DefaultPoolIdleTimeout
	var d net.Dialer
	c := &Client{
		t2:      t2,
		dial:    d.DialContext,
		pools:   map[string][]*outerConn{},
		dialing: map[string]*dialCall{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Dial opens one HBONE CONNECT stream to t.Authority over a pooled mTLS
// HTTP/2 connection to t.Addr. ctx bounds the dial only, as with net.Dialer.
// Closing the returned conn ends the stream, never the pooled connection.
func (c *Client) Dial(ctx context.Context, t Target) (net.Conn, error) {
	oc, err := c.reserve(ctx, t)
	if err != nil {
		c.errs.Add(1)
		return nil, err
	}
	sc, err := c.connect(ctx, oc.cc, t, oc.local)
	if err != nil {
		c.release(oc)
		if cause := closedCause(oc); cause != nil {
			err = fmt.Errorf("%w (the connection ended: %w)", err, cause)
		}
		return nil, err
	}
	sc.onClose = func() error { c.release(oc); return nil }
	return sc, nil
}

// Close closes every pooled connection, which ends all streams on them.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	pools := c.pools
	c.pools = map[string][]*outerConn{}
	c.mu.Unlock()
	var errs []error
	for _, conns := range pools {
		for _, oc := range conns {
			errs = append(errs, oc.cc.Close())
		}
	}
	return errors.Join(errs...)
}

// Stats returns the counters so far.
func (c *Client) Stats() ClientStats {
	return ClientStats{
		OuterConnsDialed: c.outerDialed.Load(),
		InnerConnsDialed: c.innerDialed.Load(),
		Streams:          c.streams.Load(),
		Refused:          c.refused.Load(),
		Errors:           c.errs.Load(),
	}
}
