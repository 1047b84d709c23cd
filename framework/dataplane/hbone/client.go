package hbone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
		return nil, err
	}
	sc.onClose = func() error { c.release(oc); return nil }
	return sc, nil
}

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
		c.mu.Unlock()
		d.err = err
		close(d.done)
		if err != nil {
			return nil, err
		}
	}
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
	// In TLS 1.3 the client finishes first and learns that the server refused
	// its certificate only on its next read; one PING round trip turns that
	// into this dial's error instead of a dead connection in the pool.
	if err := cc.Ping(ctx); err != nil {
		_ = cc.Close()
		return nil, fmt.Errorf("hbone: HTTP/2 to %s: %w", t.Addr, err)
	}
	return &outerConn{cc: cc, local: raw.LocalAddr()}, nil
}

// connect sends CONNECT t.Authority on cc and wraps the stream as a net.Conn.
func (c *Client) connect(ctx context.Context, cc *http2.ClientConn, t Target, local net.Addr) (*streamConn, error) {
	// The stream outlives ctx (net.Dialer semantics): ctx only bounds the
	// wait for the response headers.
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	pr, pw := io.Pipe()
	hdr := t.Headers.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	req := (&http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Host: t.Authority},
		Host:   t.Authority,
		Header: hdr,
		Body:   pr,
		// Unknown length: the body is the client-to-server byte stream.
		ContentLength: -1,
	}).WithContext(streamCtx)
	resp, err := cc.RoundTrip(req)
	if !stop() {
		// ctx ended first; the stream was or will be reset by cancel.
		if err == nil {
			_ = resp.Body.Close()
		}
		_ = pw.Close()
		cancel()
		c.errs.Add(1)
		return nil, fmt.Errorf("hbone: CONNECT %s via %s: %w", t.Authority, t.Addr, ctx.Err())
	}
	if err != nil {
		_ = pw.Close()
		cancel()
		c.errs.Add(1)
		return nil, fmt.Errorf("hbone: CONNECT %s via %s: %w", t.Authority, t.Addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxReasonBytes))
		_ = resp.Body.Close()
		_ = pw.Close()
		cancel()
		c.refused.Add(1)
		return nil, fmt.Errorf("hbone: CONNECT %s via %s refused: %s: %s",
			t.Authority, t.Addr, resp.Status, strings.TrimSpace(string(body)))
	}
	c.streams.Add(1)
	return &streamConn{
		body:   resp.Body,
		pw:     pw,
		cancel: cancel,
		local:  local,
		remote: Addr(t.Authority),
	}, nil
}

// streamConn is a client CONNECT stream: writes go to the request body,
// reads come from the response body.
type streamConn struct {
	body    io.ReadCloser
	pw      *io.PipeWriter
	cancel  context.CancelFunc
	local   net.Addr
	remote  net.Addr
	onClose func() error

	closeOnce sync.Once
	closeErr  error
}

func (s *streamConn) Read(p []byte) (int, error)  { return s.body.Read(p) }
func (s *streamConn) Write(p []byte) (int, error) { return s.pw.Write(p) }

// CloseWrite ends the request body (END_STREAM); reads continue.
func (s *streamConn) CloseWrite() error { return s.pw.Close() }

// Close ends both directions of the stream (RST_STREAM if the server has not
// finished) and, for double HBONE, the inner connection and outer stream.
func (s *streamConn) Close() error {
	s.closeOnce.Do(func() {
		_ = s.pw.Close()
		_ = s.body.Close()
		s.cancel()
		if s.onClose != nil {
			s.closeErr = s.onClose()
		}
	})
	return s.closeErr
}

// LocalAddr is the outer TCP connection's local address.
func (s *streamConn) LocalAddr() net.Addr { return s.local }

// RemoteAddr is the CONNECT authority, as an Addr.
func (s *streamConn) RemoteAddr() net.Addr { return s.remote }

// SetDeadline and its siblings are no-ops returning nil: an HTTP/2 stream has
// no socket to time out. Bound waits with Close (e.g. from a context.AfterFunc).
func (s *streamConn) SetDeadline(time.Time) error      { return nil }
func (s *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (s *streamConn) SetWriteDeadline(time.Time) error { return nil }
