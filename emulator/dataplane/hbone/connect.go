package hbone

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

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
		return nil, &RefusedError{Authority: t.Authority, Via: t.Addr, StatusCode: resp.StatusCode, Status: resp.Status,
			Reason: strings.TrimSpace(string(body))}
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

// RefusedError is a CONNECT the hop answered with a status other than 200: its TLS and HTTP/2
// came up (it took the client's identity), and it refused the tunnel.
type RefusedError struct {
	Authority, Via string
	StatusCode     int
	Status         string // as the response gives it, e.g. "503 Service Unavailable"
	Reason         string // the response body, trimmed
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("hbone: CONNECT %s via %s refused: %s: %s", e.Authority, e.Via, e.Status, e.Reason)
}
