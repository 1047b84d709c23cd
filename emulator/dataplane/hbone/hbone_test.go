package hbone

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/ambientmc/ambientmc/framework/pki"
)

const (
	echoHost  = "echo.probe.svc.cluster.local:80"
	network1  = "network-1"
	testWait  = 10 * time.Second
	appSecret = "app-payload-must-stay-encrypted"
)

// mesh is one root, two cluster intermediates and the workload certs the
// tests use: the client in cluster-1, echo and the gateway in cluster-2.
type mesh struct {
	root             *pki.Root
	c1, c2           *pki.Intermediate
	client, echo, gw *pki.Cert
}

var (
	meshOnce sync.Once
	theMesh  mesh
	meshErr  error
)

// newMesh is shared: key generation is not free on two cores, and no test
// mutates the certificates.
func newMesh(t testing.TB) mesh {
	t.Helper()
	meshOnce.Do(func() {
		var m mesh
		if m.root, meshErr = pki.NewRoot(); meshErr != nil {
			return
		}
		if m.c1, meshErr = m.root.NewIntermediate("cluster-1"); meshErr != nil {
			return
		}
		if m.c2, meshErr = m.root.NewIntermediate("cluster-2"); meshErr != nil {
			return
		}
		if m.client, meshErr = m.c1.Issue("probe", "client", time.Hour); meshErr != nil {
			return
		}
		if m.echo, meshErr = m.c2.Issue("probe", "echo", time.Hour); meshErr != nil {
			return
		}
		m.gw, meshErr = m.c2.Issue(pki.IstioNamespace, "istio-eastwestgateway", time.Hour)
		theMesh = m
	})
	require.NoError(t, meshErr)
	return theMesh
}

func (m mesh) clientTLS(allowed ...string) *tls.Config {
	return pki.ClientConfig(m.client, m.root.Pool(), allowed...)
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// startEcho runs a TCP echo server that half-closes after its peer does.
func startEcho(t testing.TB) string {
	t.Helper()
	l := listen(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return l.Addr().String()
}

func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// serve starts an HBONE server with cert on a fresh 127.0.0.1 listener.
func serve(t testing.TB, m mesh, cert *pki.Cert, h Handler) *Server {
	t.Helper()
	s := Serve(listen(t), pki.ServerConfig(cert, m.root.Pool()), h)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// toEcho is a destination handler that sends every CONNECT to echoAddr.
func toEcho(echoAddr string) Handler {
	return func(ctx context.Context, _ *http.Request, _ string) (net.Conn, int, error) {
		c, err := dialTCP(ctx, echoAddr)
		if err != nil {
			return nil, http.StatusServiceUnavailable, err
		}
		return c, http.StatusOK, nil
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t testing.TB) *Client {
	c := NewClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads back exactly len(msg) bytes.
func roundTrip(t testing.TB, c net.Conn, msg []byte) {
	t.Helper()
	_, err := c.Write(msg)
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, msg, got)
}

func TestHBONERoundTrip(t *testing.T) {
	m := newMesh(t)
	echo := startEcho(t)
	type seen struct {
		peer, host string
		hdr        http.Header
	}
	seenc := make(chan seen, 1)
	srv := serve(t, m, m.echo, func(ctx context.Context, r *http.Request, peer string) (net.Conn, int, error) {
		seenc <- seen{peer: peer, host: r.Host, hdr: r.Header.Clone()}
		return toEcho(echo)(ctx, r, peer)
	})
	c := newClient(t)
	conn, err := c.Dial(ctxT(t), Target{
		Addr:      srv.Addr().String(),
		Authority: "127.0.0.9:8080",
		TLS:       m.clientTLS(m.echo.ID),
		Headers: http.Header{
			HeaderForwarded: {`for="127.0.0.5"`},
			HeaderBaggage:   {"k8s.cluster.name=cluster-1"},
		},
	})
	require.NoError(t, err)
	defer conn.Close()
	roundTrip(t, conn, []byte("hello over hbone"))

	s := <-seenc
	assert.Equal(t, m.client.ID, s.peer)
	assert.Equal(t, "127.0.0.9:8080", s.host)
	assert.Equal(t, `for="127.0.0.5"`, s.hdr.Get(HeaderForwarded))
	assert.Equal(t, "k8s.cluster.name=cluster-1", s.hdr.Get(HeaderBaggage))
	assert.Equal(t, Addr("127.0.0.9:8080"), conn.RemoteAddr())
	assert.Equal(t, ClientStats{OuterConnsDialed: 1, Streams: 1}, c.Stats())
}

func TestHBONEHalfClose(t *testing.T) {
	m := newMesh(t)
	echo := startEcho(t)
	srv := serve(t, m, m.echo, toEcho(echo))
	c := newClient(t)
	target := Target{Addr: srv.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS()}

	t.Run("client closes write first", func(t *testing.T) {
		// The echo server replies only to what it got, then half-closes on
		// our EOF: reading everything plus EOF proves END_STREAM reached it.
		conn, err := c.Dial(ctxT(t), target)
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Write([]byte("ping"))
		require.NoError(t, err)
		require.NoError(t, conn.(interface{ CloseWrite() error }).CloseWrite())
		got, err := io.ReadAll(conn)
		require.NoError(t, err)
		assert.Equal(t, "ping", string(got))
	})

	t.Run("upstream closes first", func(t *testing.T) {
		l := listen(t)
		go func() {
			u, err := l.Accept()
			if err == nil {
				_, _ = u.Write([]byte("bye"))
				_ = u.Close()
			}
		}()
		bye := serve(t, m, m.echo, toEcho(l.Addr().String()))
		conn, err := c.Dial(ctxT(t), Target{Addr: bye.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS()})
		require.NoError(t, err)
		defer conn.Close()
		got, err := io.ReadAll(conn)
		require.NoError(t, err)
		assert.Equal(t, "bye", string(got))
	})
}

func TestPooling(t *testing.T) {
	m := newMesh(t)
	echo := startEcho(t)
	srv := serve(t, m, m.echo, toEcho(echo))
	target := func(key string) Target {
		return Target{Addr: srv.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS(m.echo.ID), PoolKey: key}
	}

	t.Run("sequential", func(t *testing.T) {
		c := newClient(t)
		for i := range 20 {
			conn, err := c.Dial(ctxT(t), target("a"))
			require.NoError(t, err)
			roundTrip(t, conn, fmt.Appendf(nil, "seq %d", i))
			require.NoError(t, conn.Close())
		}
		assert.Equal(t, int64(1), c.Stats().OuterConnsDialed)
		assert.Equal(t, int64(20), c.Stats().Streams)
	})

	t.Run("concurrent", func(t *testing.T) {
		c := newClient(t)
		before := srv.Stats().Conns
		conns := dialMany(t, 20, func() (net.Conn, error) { return c.Dial(ctxT(t), target("b")) })
		for i, conn := range conns {
			roundTrip(t, conn, fmt.Appendf(nil, "conc %d", i))
		}
		assert.Equal(t, int64(1), c.Stats().OuterConnsDialed)
		assert.Equal(t, int64(1), srv.Stats().Conns-before, "server accepted more than one connection")
	})

	t.Run("different keys", func(t *testing.T) {
		c := newClient(t)
		for _, key := range []string{"x", "y", "z", "x", "y", "z"} {
			conn, err := c.Dial(ctxT(t), target(key))
			require.NoError(t, err)
			roundTrip(t, conn, []byte(key))
			require.NoError(t, conn.Close())
		}
		assert.Equal(t, int64(3), c.Stats().OuterConnsDialed)
	})

	t.Run("stream limit", func(t *testing.T) {
		// ztunnel opens another connection once one holds 100 streams.
		c := newClient(t)
		conns := dialMany(t, maxStreams+1, func() (net.Conn, error) { return c.Dial(ctxT(t), target("limit")) })
		roundTrip(t, conns[len(conns)-1], []byte("101st"))
		assert.Equal(t, int64(2), c.Stats().OuterConnsDialed)
	})
}

// dialMany dials n conns concurrently and keeps them open until the test ends,
// so they are simultaneous streams.
func dialMany(t *testing.T, n int, dial func() (net.Conn, error)) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			conns[i], errs[i] = dial()
		})
	}
	close(start)
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	require.NoError(t, errors.Join(errs...))
	return conns
}

// recordingConn keeps every byte the gateway relays, both ways.
type recordingConn struct {
	net.Conn
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (r recordingConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	r.buf.Write(p[:n])
	r.mu.Unlock()
	return n, err
}

func (r recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.buf.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

func (r recordingConn) CloseWrite() error { return r.Conn.(*net.TCPConn).CloseWrite() }

// gateway is the emulated east-west gateway: it terminates only the outer
// tunnel and forwards the inner bytes to the destination's HBONE port.
type gateway struct {
	*Server
	mu       sync.Mutex
	relayed  bytes.Buffer
	peers    []string
	services map[string]string // authority -> destination ip:15008
}

func startGateway(t *testing.T, m mesh, services map[string]string) *gateway {
	g := &gateway{services: services}
	g.Server = serve(t, m, m.gw, func(ctx context.Context, r *http.Request, peer string) (net.Conn, int, error) {
		g.mu.Lock()
		g.peers = append(g.peers, peer)
		g.mu.Unlock()
		dst, ok := g.services[r.Host]
		if !ok {
			return nil, http.StatusServiceUnavailable, fmt.Errorf("no endpoints for %s in this network", r.Host)
		}
		c, err := dialTCP(ctx, dst)
		if err != nil {
			return nil, http.StatusBadGateway, err
		}
		return recordingConn{Conn: c, mu: &g.mu, buf: &g.relayed}, http.StatusOK, nil
	})
	return g
}

func (g *gateway) relayedBytes() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return bytes.Clone(g.relayed.Bytes())
}

func TestDoubleHBONE(t *testing.T) {
	m := newMesh(t)
	echo := startEcho(t)
	type seen struct{ peer, host, network string }
	var mu sync.Mutex
	var dstSeen []seen
	dst := serve(t, m, m.echo, func(ctx context.Context, r *http.Request, peer string) (net.Conn, int, error) {
		mu.Lock()
		dstSeen = append(dstSeen, seen{peer, r.Host, r.Header.Get(HeaderForwardedNetwork)})
		mu.Unlock()
		return toEcho(echo)(ctx, r, peer)
	})
	gw := startGateway(t, m, map[string]string{echoHost: dst.Addr().String()})

	c := newClient(t)
	outer := Target{
		Addr: gw.Addr().String(), Authority: echoHost,
		TLS:     m.clientTLS(m.gw.ID),
		PoolKey: "client|gw",
		Headers: http.Header{HeaderForwarded: {`for="127.0.0.5";host=` + echoHost}},
	}
	inner := Target{
		Authority: echoHost,
		TLS:       m.clientTLS(m.echo.ID),
		Headers: http.Header{
			HeaderForwarded:        {`for="127.0.0.5";host=` + echoHost},
			HeaderForwardedNetwork: {network1},
		},
	}
	const dials = 10
	for i := range dials {
		conn, err := c.DialDouble(ctxT(t), outer, inner)
		require.NoError(t, err)
		roundTrip(t, conn, fmt.Appendf(nil, "%s %d", appSecret, i))
		require.NoError(t, conn.Close())
	}

	st := c.Stats()
	assert.Equal(t, int64(1), st.OuterConnsDialed, "outer connection to the gateway is pooled")
	assert.Equal(t, int64(dials), st.InnerConnsDialed, "inner connections are never pooled")
	assert.Equal(t, int64(2*dials), st.Streams)
	assert.Equal(t, int64(1), gw.Stats().Conns)
	assert.Equal(t, int64(dials), gw.Stats().Streams)
	assert.Equal(t, int64(dials), dst.Stats().Conns, "one inner handshake per double dial")

	mu.Lock()
	require.Len(t, dstSeen, dials)
	for _, s := range dstSeen {
		assert.Equal(t, seen{m.client.ID, echoHost, network1}, s)
	}
	mu.Unlock()
	gw.mu.Lock()
	for _, p := range gw.peers {
		assert.Equal(t, m.client.ID, p)
	}
	gw.mu.Unlock()

	relayed := gw.relayedBytes()
	require.NotEmpty(t, relayed)
	assert.False(t, bytes.Contains(relayed, []byte(appSecret)), "gateway relayed plaintext app bytes")
	assert.False(t, bytes.Contains(relayed, []byte(network1)), "gateway saw the inner CONNECT headers")
	// The first relayed bytes are the inner TLS ClientHello (handshake record).
	assert.Equal(t, byte(0x16), relayed[0])
}

func TestDoubleHBONEWrongInnerIdentity(t *testing.T) {
	m := newMesh(t)
	dst := serve(t, m, m.echo, toEcho(startEcho(t)))
	gw := startGateway(t, m, map[string]string{echoHost: dst.Addr().String()})
	c := newClient(t)
	want := pki.SPIFFEID("probe", "not-echo")
	_, err := c.DialDouble(ctxT(t),
		Target{Addr: gw.Addr().String(), Authority: echoHost, TLS: m.clientTLS(m.gw.ID)},
		Target{Authority: echoHost, TLS: m.clientTLS(want)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), m.echo.ID)
	assert.Contains(t, err.Error(), want)
	assert.Equal(t, int64(0), dst.Stats().Streams)
}

func TestRefusals(t *testing.T) {
	m := newMesh(t)
	dst := serve(t, m, m.echo, toEcho(startEcho(t)))
	gw := startGateway(t, m, map[string]string{echoHost: dst.Addr().String()})

	t.Run("unknown authority", func(t *testing.T) {
		c := newClient(t)
		_, err := c.DialDouble(ctxT(t),
			Target{Addr: gw.Addr().String(), Authority: "nope.probe.svc.cluster.local:80", TLS: m.clientTLS(m.gw.ID)},
			Target{Authority: "nope.probe.svc.cluster.local:80", TLS: m.clientTLS(m.echo.ID)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "503")
		assert.Contains(t, err.Error(), "no endpoints for nope.probe.svc.cluster.local:80")
		assert.Equal(t, int64(1), c.Stats().Refused)
		assert.Equal(t, int64(1), gw.Stats().Refused)

		// The refusal was per stream: the pooled connection still works.
		conn, err := c.DialDouble(ctxT(t),
			Target{Addr: gw.Addr().String(), Authority: echoHost, TLS: m.clientTLS(m.gw.ID)},
			Target{Authority: echoHost, TLS: m.clientTLS(m.echo.ID)})
		require.NoError(t, err)
		defer conn.Close()
		roundTrip(t, conn, []byte("after refusal"))
		assert.Equal(t, int64(1), c.Stats().OuterConnsDialed)
	})

	t.Run("client cert from a foreign root", func(t *testing.T) {
		foreignRoot, err := pki.NewRoot()
		require.NoError(t, err)
		foreignCA, err := foreignRoot.NewIntermediate("cluster-1")
		require.NoError(t, err)
		imposter, err := foreignCA.Issue("probe", "client", time.Hour)
		require.NoError(t, err)
		before := dst.Stats()
		c := newClient(t)
		_, err = c.Dial(ctxT(t), Target{
			Addr: dst.Addr().String(), Authority: "127.0.0.9:80",
			// Trusts the real mesh root, so only the server can refuse.
			TLS: pki.ClientConfig(imposter, m.root.Pool(), m.echo.ID),
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "bad certificate")
		// The server counts after its alert is on the wire, so it may lag.
		require.Eventually(t, func() bool { return dst.Stats().HandshakeErrors == before.HandshakeErrors+1 },
			testWait, 5*time.Millisecond)
		assert.Equal(t, before.Conns, dst.Stats().Conns)
		assert.Equal(t, before.Streams, dst.Stats().Streams)
		assert.Equal(t, int64(1), c.Stats().OuterConnsDialed, "refused connection was dialed again")
	})

	t.Run("server with the wrong identity", func(t *testing.T) {
		want := pki.SPIFFEID("probe", "echo-v2")
		c := newClient(t)
		_, err := c.Dial(ctxT(t), Target{Addr: dst.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS(want)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), m.echo.ID)
		assert.Contains(t, err.Error(), want)
		assert.Equal(t, int64(0), c.Stats().OuterConnsDialed)
	})

	t.Run("non-CONNECT method", func(t *testing.T) {
		tr := &http2.Transport{TLSClientConfig: m.clientTLS(m.echo.ID)}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, "https://"+dst.Addr().String()+"/", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Contains(t, string(body), "only CONNECT")
	})

	t.Run("handler error without status", func(t *testing.T) {
		s := serve(t, m, m.echo, func(context.Context, *http.Request, string) (net.Conn, int, error) {
			return nil, 0, errors.New("policy says no")
		})
		_, err := newClient(t).Dial(ctxT(t), Target{Addr: s.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS()})
		require.Error(t, err)
		var refused *RefusedError
		require.ErrorAs(t, err, &refused, "a CONNECT answered with a refusal, told apart from a transport failure")
		assert.Equal(t, http.StatusServiceUnavailable, refused.StatusCode)
		assert.Equal(t, "hbone: 127.0.0.9:80: policy says no", refused.Reason, "the reason names the refused authority and the handler's error")
		assert.Contains(t, err.Error(), "503")
		assert.Contains(t, err.Error(), "policy says no")
	})
}

// upstreamSpy accepts one conn, echoes, and reports how its read side ended.
func upstreamSpy(t *testing.T) (addr string, ended <-chan error) {
	l := listen(t)
	ch := make(chan error, 1)
	go func() {
		u, err := l.Accept()
		if err != nil {
			ch <- err
			return
		}
		defer u.Close()
		buf := make([]byte, 64)
		for {
			n, err := u.Read(buf)
			if err != nil {
				ch <- err
				return
			}
			_, _ = u.Write(buf[:n])
		}
	}()
	return l.Addr().String(), ch
}

func TestCloseEndsUpstreamAndKeepsPool(t *testing.T) {
	m := newMesh(t)
	spy, ended := upstreamSpy(t)
	echo := startEcho(t)
	var mu sync.Mutex
	n := 0
	srv := serve(t, m, m.echo, func(ctx context.Context, r *http.Request, peer string) (net.Conn, int, error) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			return toEcho(spy)(ctx, r, peer)
		}
		return toEcho(echo)(ctx, r, peer)
	})
	c := newClient(t)
	target := Target{Addr: srv.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS(), PoolKey: "k"}

	conn, err := c.Dial(ctxT(t), target)
	require.NoError(t, err)
	roundTrip(t, conn, []byte("before close"))
	require.NoError(t, conn.Close())
	select {
	case err := <-ended:
		assert.ErrorIs(t, err, io.EOF)
	case <-time.After(testWait):
		t.Fatal("upstream still open after the client closed the stream")
	}
	_, err = conn.Write([]byte("x"))
	assert.Error(t, err, "write after Close")
	require.Eventually(t, func() bool { return srv.Stats().Active == 0 }, testWait, 10*time.Millisecond)

	next, err := c.Dial(ctxT(t), target)
	require.NoError(t, err)
	defer next.Close()
	roundTrip(t, next, []byte("after close"))
	assert.Equal(t, int64(1), c.Stats().OuterConnsDialed)
}

func TestDialContext(t *testing.T) {
	m := newMesh(t)
	release := make(chan struct{})
	srv := serve(t, m, m.echo, func(ctx context.Context, _ *http.Request, _ string) (net.Conn, int, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, http.StatusServiceUnavailable, errors.New("too late")
	})
	defer close(release)
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Dial(ctx, Target{Addr: srv.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS()})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), testWait/2)
}

func TestServerClose(t *testing.T) {
	m := newMesh(t)
	spy, ended := upstreamSpy(t)
	srv := Serve(listen(t), pki.ServerConfig(m.echo, m.root.Pool()), toEcho(spy))
	c := newClient(t)
	conn, err := c.Dial(ctxT(t), Target{Addr: srv.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS()})
	require.NoError(t, err)
	defer conn.Close()
	roundTrip(t, conn, []byte("live"))

	require.NoError(t, srv.Close())
	select {
	case <-ended:
	case <-time.After(testWait):
		t.Fatal("upstream still open after Server.Close")
	}
	_, err = io.ReadAll(conn)
	_ = err // a reset or EOF: either way the read returned
	_, err = net.DialTimeout("tcp", srv.Addr().String(), time.Second)
	assert.Error(t, err, "listener still accepting")
}

func TestPipe(t *testing.T) {
	// a1<->a2 and b1<->b2 are TCP pairs; Pipe(a2, b1) joins them.
	pair := func() (net.Conn, net.Conn) {
		l := listen(t)
		acc := make(chan net.Conn, 1)
		go func() {
			c, _ := l.Accept()
			acc <- c
		}()
		c, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		s := <-acc
		require.NotNil(t, s)
		return c, s
	}
	a1, a2 := pair()
	b1, b2 := pair()
	defer a1.Close()
	defer b2.Close()
	done := make(chan error, 1)
	go func() { done <- Pipe(a2, b1) }()

	_, err := a1.Write([]byte("to b"))
	require.NoError(t, err)
	require.NoError(t, a1.(*net.TCPConn).CloseWrite())
	got, err := io.ReadAll(b2) // EOF arrives only through CloseWrite propagation
	require.NoError(t, err)
	assert.Equal(t, "to b", string(got))

	// The other direction still flows after the half-close.
	_, err = b2.Write([]byte("to a"))
	require.NoError(t, err)
	require.NoError(t, b2.(*net.TCPConn).CloseWrite())
	got, err = io.ReadAll(a1)
	require.NoError(t, err)
	assert.Equal(t, "to a", string(got))
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(testWait):
		t.Fatal("Pipe did not return after both directions ended")
	}
	assert.True(t, strings.HasPrefix(Addr("x").Network(), "hbone"))
}

func TestNoGoroutineLeaks(t *testing.T) {
	m := newMesh(t)
	t.Run("double HBONE then close everything", func(t *testing.T) {
		dst := serve(t, m, m.echo, toEcho(startEcho(t)))
		gw := startGateway(t, m, map[string]string{echoHost: dst.Addr().String()})
		c := newClient(t)
		for range 3 {
			conn, err := c.DialDouble(ctxT(t),
				Target{Addr: gw.Addr().String(), Authority: echoHost, TLS: m.clientTLS(m.gw.ID)},
				Target{Authority: echoHost, TLS: m.clientTLS(m.echo.ID)})
			require.NoError(t, err)
			roundTrip(t, conn, []byte("leak check"))
			require.NoError(t, conn.Close())
		}
		// One stream left open: Client.Close and Server.Close must end it.
		_, err := c.Dial(ctxT(t), Target{Addr: dst.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS()})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(ourGoroutines()) > 0 }, testWait, time.Millisecond,
			"the leak check sees no goroutines of ours while they surely run")
	})
	// Runtime-internal goroutines come and go; only ours must all be gone.
	var left []string
	ok := assert.Eventually(t, func() bool {
		left = ourGoroutines()
		return len(left) == 0
	}, testWait, 20*time.Millisecond)
	if !ok {
		t.Logf("%d goroutines left:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// ourGoroutines returns the stacks of goroutines running this package's,
// HTTP/2's or a socket's code, other than the check's own.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	stacks := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	var ours []string
	for _, st := range stacks {
		if strings.Contains(st, "hbone.ourGoroutines") || strings.Contains(st, "hbone.TestNoGoroutineLeaks(") {
			continue // the checker and the test itself
		}
		for _, mark := range []string{"emulator/dataplane/hbone.", "golang.org/x/net/http2.", "internal/poll."} {
			if strings.Contains(st, mark) {
				ours = append(ours, st)
				break
			}
		}
	}
	return ours
}
