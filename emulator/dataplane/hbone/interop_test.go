package hbone

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	istiohbone "istio.io/istio/pkg/hbone"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// These tests hold the emulated data plane's HBONE against Istio's own Go implementation
// (istio.io/istio/pkg/hbone), not only against itself: each side is paired with Istio's
// counterpart over real mTLS with certificates from framework/pki, on 127.0.0.1.

var interopPayload = []byte(appSecret + " through Istio's HBONE")

// istioServe runs one of Istio's HBONE http.Servers behind a TLS listener, as Istio's echo app
// does (pkg/test/echo/server/endpoint/hbone.go): http.Server then serves h2 by ALPN.
func istioServe(t *testing.T, s *http.Server, cfg *tls.Config) string {
	t.Helper()
	l := listen(t)
	go func() { _ = s.Serve(tls.NewListener(l, cfg)) }()
	t.Cleanup(func() { _ = s.Close() })
	return l.Addr().String()
}

// h2Only keeps ALPN at exactly h2 for the inner layer of Istio's double-HBONE server. Its
// servers enable HTTP/1 and unencrypted HTTP/2 only, so the http.Server.ServeTLS it runs for the
// inner layer drops "h2" from NextProtos, and a client offering only h2 (ztunnel, this client)
// gets no_application_protocol. A config returned by GetConfigForClient is used as is.
func h2Only(cfg *tls.Config) *tls.Config {
	out := cfg.Clone()
	out.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return cfg, nil }
	return out
}

// The ztunnel-style inbound server accepts a tunnel from Istio's HBONE dialer: CONNECT with
// Istio's authority, the client's SPIFFE identity seen, bytes relayed both ways.
func TestServerAcceptsIstioDialer(t *testing.T) {
	m := newMesh(t)
	echo := startEcho(t)
	var mu sync.Mutex
	var authority, peer string
	srv := serve(t, m, m.echo, func(ctx context.Context, r *http.Request, id string) (net.Conn, int, error) {
		mu.Lock()
		authority, peer = r.Host, id
		mu.Unlock()
		return toEcho(echo)(ctx, r, id)
	})
	d := istiohbone.NewDialer(istiohbone.Config{
		ProxyAddress: srv.Addr().String(),
		TLS:          m.clientTLS(pki.SPIFFEID("probe", "echo")),
	})
	c, err := d.DialContext(ctxT(t), "tcp", echoHost)
	require.NoError(t, err)
	defer c.Close()
	roundTrip(t, c, interopPayload)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, echoHost, authority)
	assert.Equal(t, pki.SPIFFEID("probe", "client"), peer)
	assert.Equal(t, int64(1), srv.Stats().Conns)
}

// The emulated client's HBONE dial is served by Istio's HBONE server, which dials the
// CONNECT's authority itself.
func TestClientDialServedByIstioServer(t *testing.T) {
	m := newMesh(t)
	echo := startEcho(t)
	addr := istioServe(t, istiohbone.NewServer(), pki.ServerConfig(m.echo, m.root.Pool()))
	cl := newClient(t)
	c, err := cl.Dial(ctxT(t), Target{Addr: addr, Authority: echo, TLS: m.clientTLS(pki.SPIFFEID("probe", "echo"))})
	require.NoError(t, err)
	defer c.Close()
	roundTrip(t, c, interopPayload)
	assert.Equal(t, int64(1), cl.Stats().Streams)
}

// The emulated double-HBONE client completes a round trip against Istio's double-HBONE
// server, which terminates the outer tunnel as the gateway and the inner one as the
// destination: outer identity the gateway's, inner the destination's. Istio's server refuses an
// IP as the outer authority (ztunnel sends the service hostname there) and dials the inner
// authority itself, so the inner CONNECT names the echo server's address.
func TestDoubleClientAgainstIstioDoubleServer(t *testing.T) {
	m := newMesh(t)
	echo := startEcho(t)
	gwID, echoID := pki.SPIFFEID(pki.IstioNamespace, "istio-eastwestgateway"), pki.SPIFFEID("probe", "echo")
	inner := h2Only(pki.ServerConfig(m.echo, m.root.Pool(), pki.SPIFFEID("probe", "client")))
	addr := istioServe(t, istiohbone.NewDoubleHBONEServer(inner), pki.ServerConfig(m.gw, m.root.Pool()))
	cl := newClient(t)
	c, err := cl.DialDouble(ctxT(t),
		Target{Addr: addr, Authority: echoHost, TLS: m.clientTLS(gwID)},
		Target{Authority: echo, TLS: m.clientTLS(echoID)})
	require.NoError(t, err)
	defer c.Close()
	roundTrip(t, c, interopPayload)
	st := cl.Stats()
	assert.Equal(t, int64(1), st.OuterConnsDialed)
	assert.Equal(t, int64(1), st.InnerConnsDialed)
	assert.Equal(t, int64(2), st.Streams, "outer and inner CONNECT")

	// The identities are checked on both layers: a client expecting another gateway is refused.
	_, err = cl.DialDouble(ctxT(t),
		Target{Addr: addr, Authority: echoHost, TLS: m.clientTLS(echoID), PoolKey: "other"},
		Target{Authority: echo, TLS: m.clientTLS(echoID)})
	assert.Error(t, err, "outer identity not checked")
	_, err = cl.DialDouble(ctxT(t),
		Target{Addr: addr, Authority: echoHost, TLS: m.clientTLS(gwID)},
		Target{Authority: echo, TLS: m.clientTLS(gwID)})
	assert.Error(t, err, "inner identity not checked")
}
