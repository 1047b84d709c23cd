package hbone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"
)

// reserve returns a pooled connection with a stream slot taken, dialing one
// when none has room; concurrent callers for one key share a single dial.
func (c *Client) reserve(ctx context.Context, t Target) (*outerConn, error) {
	if t.TLS == nil {
		return nil, fmt.Errorf("hbone: target %s has no TLS config", t.Addr)
	}
	key := t.PoolKey
	if key == "" {
		key = t.Addr
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, errors.New("hbone: client closed")
		}
		if oc := c.pickLocked(key); oc != nil {
			c.mu.Unlock()
			return oc, nil
		}
		if d := c.dialing[key]; d != nil {
			c.mu.Unlock()
			select {
			case <-d.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			// Another caller's cancelled dial says nothing about ours.
			if d.err != nil && !errors.Is(d.err, context.Canceled) && !errors.Is(d.err, context.DeadlineExceeded) {
				return nil, d.err
			}
			continue
		}
		d := &dialCall{done: make(chan struct{})}
		c.dialing[key] = d
		c.mu.Unlock()

		oc, err := c.dialOuter(ctx, t)
		c.mu.Lock()
		delete(c.dialing, key)
		if err == nil {
			if c.closed {
				err = errors.New("hbone: client closed")
				_ = oc.cc.Close()
			} else {
				c.pools[key] = append(c.pools[key], oc)
			}
		}
		// The dialer's stream goes on the connection it dialed, even one the server closed
		// meanwhile (in TLS 1.3 a refused client certificate arrives after the handshake): its
		// CONNECT then fails with the server's refusal, as ztunnel's first CONNECT on a new
		// connection does, where picking from the pool again would drop it and dial anew.
		if err == nil {
			oc.active++
			oc.cc.ReserveNewRequest()
		}
		c.mu.Unlock()
		d.err = err
		close(d.done)
		if err != nil {
			return nil, err
		}
		return oc, nil
	}
}

// closedCause is why oc's TLS connection ended, nil while it is open: a TLS connection keeps the
// error its reader met (the server's alert), so a read returns it at once.
func closedCause(oc *outerConn) error {
	if oc.tc == nil || !oc.cc.State().Closed {
		return nil
	}
	_ = oc.tc.SetReadDeadline(time.Now())
	_, err := oc.tc.Read(make([]byte, 1))
	return err
}

// pickLocked drops dead connections of key and reserves a slot on a live one.
func (c *Client) pickLocked(key string) *outerConn {
	conns := c.pools[key]
	live := conns[:0]
	var picked *outerConn
	for _, oc := range conns {
		st := oc.cc.State()
		if st.Closed || st.Closing {
			// Closing (GOAWAY) conns finish their streams and close themselves.
			continue
		}
		live = append(live, oc)
		if picked == nil && oc.active < maxStreams && oc.cc.ReserveNewRequest() {
			oc.active++
			picked = oc
		}
	}
	clear(conns[len(live):])
	if len(live) == 0 {
		delete(c.pools, key)
	} else {
		c.pools[key] = live
	}
	return picked
}

func (c *Client) release(oc *outerConn) {
	c.mu.Lock()
	oc.active--
	c.mu.Unlock()
}

// dialOuter opens TCP, completes mTLS and starts an HTTP/2 client connection.
func (c *Client) dialOuter(ctx context.Context, t Target) (*outerConn, error) {
	raw, err := c.dial(ctx, "tcp", t.Addr)
	if err != nil {
		return nil, fmt.Errorf("hbone: dial %s: %w", t.Addr, err)
	}
	tc := tls.Client(raw, t.TLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("hbone: TLS to %s: %w", t.Addr, err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		_ = raw.Close()
		return nil, fmt.Errorf("hbone: TLS to %s negotiated %q, want h2", t.Addr, p)
	}
	cc, err := c.t2.NewClientConn(tc)
	if err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("hbone: HTTP/2 to %s: %w", t.Addr, err)
	}
	c.outerDialed.Add(1)
	// No PING before the first CONNECT, as ztunnel (src/proxy/pool.rs new_pool_conn: the CONNECT
	// follows the handshake; its first PING comes 10 s later, src/proxy/h2.rs). In TLS 1.3 a
	// server's refusal of the client's certificate arrives after the handshake, so it is the first
	// CONNECT's error, and pickLocked drops the closed connection.
	return &outerConn{cc: cc, tc: tc, local: raw.LocalAddr()}, nil
}
