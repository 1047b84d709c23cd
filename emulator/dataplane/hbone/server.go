package hbone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// handshakeTimeout bounds a TLS handshake so a silent peer cannot pin a goroutine.
const handshakeTimeout = 10 * time.Second

// lingerTimeout bounds how long a refused connection is drained.
const lingerTimeout = time.Second

// Handler decides what a CONNECT reaches. It gets the request (r.Host is the
// :authority) and the peer's verified SPIFFE ID, and returns either a
// connection to copy bytes to and from, or a non-200 status (with err as the
// reason) to refuse. A nil upstream with status 0 or 200 is answered 503.
type Handler func(ctx context.Context, r *http.Request, peerID string) (upstream net.Conn, status int, err error)

// ServerStats are a Server's cumulative counters.
type ServerStats struct {
	// Conns counts connections that completed the mTLS handshake.
	Conns int64
	// HandshakeErrors counts connections refused during TLS (e.g. a client
	// certificate from a foreign root or an unexpected identity).
	HandshakeErrors int64
	// Streams counts requests received, CONNECT or not.
	Streams int64
	// Refused counts requests answered with a status other than 200.
	Refused int64
	// Active is the number of streams currently being relayed.
	Active int64
}

// Server terminates HBONE: mTLS, HTTP/2, CONNECT.
type Server struct {
	l   net.Listener
	cfg *tls.Config
	h   Handler
	h2  *http2.Server

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	nConns, nHandshakeErrs, nStreams, nRefused, nActive atomic.Int64
}

// Serve accepts HBONE on l until Close. cfg is the server mTLS config
// (pki.ServerConfig: TLS 1.3, ALPN h2, client certificate required and
// SPIFFE-verified); every CONNECT is passed to h with the peer's identity.
func Serve(l net.Listener, cfg *tls.Config, h Handler) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		l:   l,
		cfg: cfg,
		h:   h,
		h2: &http2.Server{
			MaxConcurrentStreams:         maxStreams,
			MaxReadFrameSize:             maxFrameSize,
			MaxUploadBufferPerConnection: connWindow,
			MaxUploadBufferPerStream:     streamWindow,
		},
		ctx:    ctx,
		cancel: cancel,
		conns:  map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Close stops accepting, closes live connections (ending their streams) and
// waits for the server's goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.l.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Stats returns the counters so far.
func (s *Server) Stats() ServerStats {
	return ServerStats{
		Conns:           s.nConns.Load(),
		HandshakeErrors: s.nHandshakeErrs.Load(),
		Streams:         s.nStreams.Load(),
		Refused:         s.nRefused.Load(),
		Active:          s.nActive.Load(),
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		raw, err := s.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if !s.track(raw) {
			_ = raw.Close()
			return
		}
		s.wg.Add(1)
		go s.serveConn(raw)
	}
}

// track registers c for Close; false once the server is closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) serveConn(raw net.Conn) {
	defer s.wg.Done()
	defer s.untrack(raw)
	defer raw.Close()
	tc := tls.Server(raw, s.cfg)
	// ServeConn on a *tls.Conn whose handshake has not run fails with "TLS
	// version too low": it checks the negotiated version first.
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.HandshakeContext(s.ctx); err != nil {
		s.nHandshakeErrs.Add(1)
		lingerClose(raw)
		return
	}
	_ = raw.SetDeadline(time.Time{})
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		s.nHandshakeErrs.Add(1)
		return
	}
	// Taken from the connection: x/net sets r.TLS only for requests with
	// :scheme https, and CONNECT has no :scheme.
	peer, err := pki.PeerID(tc.ConnectionState())
	if err != nil {
		s.nHandshakeErrs.Add(1)
		return
	}
	s.nConns.Add(1)
	s.h2.ServeConn(tc, &http2.ServeConnOpts{
		Context:    s.ctx,
		BaseConfig: &http.Server{HTTP2: h2Config()},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.serveHTTP(w, r, peer)
		}),
	})
}

// lingerClose half-closes c and drains it briefly before closing. A TLS 1.3
// client sends its HTTP/2 preface right after its side of the handshake; an
// immediate close with those bytes unread resets the connection, and the
// client then sees "broken pipe" instead of the alert that says why.
func lingerClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.Copy(io.Discard, c)
	}
	_ = c.Close()
}

// refuse answers a request with status and a one-line reason.
func (s *Server) refuse(w http.ResponseWriter, status int, reason string) {
	s.nRefused.Add(1)
	http.Error(w, reason, status)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request, peer string) {
	s.wg.Add(1)
	defer s.wg.Done()
	s.nStreams.Add(1)
	if r.Method != http.MethodConnect {
		s.refuse(w, http.StatusMethodNotAllowed, "hbone: only CONNECT is served, got "+r.Method)
		return
	}
	up, status, err := s.h(r.Context(), r, peer)
	if err != nil || up == nil || (status != 0 && status != http.StatusOK) {
		if up != nil {
			_ = up.Close()
		}
		if status == 0 || status == http.StatusOK {
			status = http.StatusServiceUnavailable
		}
		reason := http.StatusText(status)
		if err != nil {
			reason = err.Error()
		}
		s.refuse(w, status, fmt.Sprintf("hbone: %s: %s", r.Host, reason))
		return
	}
	s.nActive.Add(1)
	defer s.nActive.Add(-1)

	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		_ = up.Close()
		return
	}
	st := &serverStream{
		r:           r,
		w:           w,
		rc:          rc,
		writeClosed: make(chan struct{}),
	}
	piped := make(chan struct{})
	go func() {
		defer close(piped)
		_ = Pipe(st, up)
	}()
	// HTTP/2 in net/http cannot end the response while still reading the
	// request, so the stream's write side ends when the handler returns: on
	// upstream EOF, on the client's reset, or when both directions are done.
	select {
	case <-st.writeClosed:
	case <-piped:
	case <-r.Context().Done():
		_ = up.Close()
	}
	st.finish()
	// After return the server resets the stream if the client is still
	// sending, which ends Pipe's other direction and closes up.
	context.AfterFunc(r.Context(), func() { _ = up.Close() })
}

// serverStream is the server side of a CONNECT stream as a net.Conn for Pipe.
type serverStream struct {
	r  *http.Request
	w  http.ResponseWriter
	rc *http.ResponseController

	mu   sync.Mutex
	done bool // handler returned: the ResponseWriter must not be used

	writeClosed chan struct{}
	closeOnce   sync.Once
}

func (s *serverStream) Read(p []byte) (int, error) { return s.r.Body.Read(p) }

// Write sends p and flushes it at once, as a byte stream needs.
func (s *serverStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return 0, net.ErrClosed
	}
	n, err := s.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, s.rc.Flush()
}

// CloseWrite lets the handler return, which sends END_STREAM.
func (s *serverStream) CloseWrite() error {
	s.closeOnce.Do(func() { close(s.writeClosed) })
	return nil
}

func (s *serverStream) Close() error {
	_ = s.CloseWrite()
	return s.r.Body.Close()
}

// finish fences off the ResponseWriter before the handler returns.
func (s *serverStream) finish() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

func (s *serverStream) LocalAddr() net.Addr  { return Addr(s.r.Host) }
func (s *serverStream) RemoteAddr() net.Addr { return Addr(s.r.RemoteAddr) }

// Deadlines are no-ops, as on the client side.
func (s *serverStream) SetDeadline(time.Time) error      { return nil }
func (s *serverStream) SetReadDeadline(time.Time) error  { return nil }
func (s *serverStream) SetWriteDeadline(time.Time) error { return nil }
