package hbone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// DialDouble opens a double HBONE stream: a CONNECT to outer.Authority over
// the pooled connection to the gateway at outer.Addr, then inside that stream
// a new TLS handshake (inner.TLS) and a new, unpooled HTTP/2 connection that
// carries a CONNECT to inner.Authority. inner.Addr is not dialed. Closing the
// returned conn closes the inner connection and the outer stream.
func (c *Client) DialDouble(ctx context.Context, outer, inner Target) (net.Conn, error) {
	if inner.TLS == nil {
		c.errs.Add(1)
		return nil, errors.New("hbone: double HBONE inner target has no TLS config")
	}
	outerConn, err := c.Dial(ctx, outer)
	if err != nil {
		return nil, err
	}
	innerTLS := tls.Client(outerConn, inner.TLS)
	if err := innerTLS.HandshakeContext(ctx); err != nil {
		_ = outerConn.Close()
		c.errs.Add(1)
		return nil, fmt.Errorf("hbone: inner TLS to %s via %s: %w", inner.Authority, outer.Addr, err)
	}
	if p := innerTLS.ConnectionState().NegotiatedProtocol; p != "h2" {
		_ = outerConn.Close()
		c.errs.Add(1)
		return nil, fmt.Errorf("hbone: inner TLS to %s negotiated %q, want h2", inner.Authority, p)
	}
	cc, err := c.t2.NewClientConn(innerTLS)
	if err != nil {
		_ = outerConn.Close()
		c.errs.Add(1)
		return nil, fmt.Errorf("hbone: inner HTTP/2 to %s: %w", inner.Authority, err)
	}
	c.innerDialed.Add(1)
	sc, err := c.connect(ctx, cc, inner, outerConn.LocalAddr())
	if err != nil {
		_ = outerConn.Close()
		_ = cc.Close()
		return nil, err
	}
	// Outer stream first: then the inner close_notify and GOAWAY fail fast
	// instead of waiting on a stream nobody reads (deadlines are no-ops).
	sc.onClose = func() error {
		err := outerConn.Close()
		_ = cc.Close()
		return err
	}
	return sc, nil
}
