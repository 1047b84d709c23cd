package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/emulator/dataplane"
	"github.com/ambientmc/ambientmc/emulator/dataplane/addrmap"
	"github.com/ambientmc/ambientmc/framework/bins/binstest"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostdataplane"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/probeapp"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// The emulated data plane's certificates come from istiod's CA and are renewed at half their
// lifetime while traffic flows: with a lifetime asked short (2m4s, which istiod's 2-minute
// backdating makes 4m4s from NotBefore, half of it 2 s past the issue), the echo pod's ztunnel
// presents a new certificate from half its previous one's lifetime on, again and again; a
// connection opened before a renewal keeps carrying requests after it, and new connections
// handshake with the renewed certificates. istiod counts the renewals as CSRs.
func TestProbeCertificatesRenewAtHalfTheirLifetimeUnderTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pilot := binstest.PilotDiscovery(t, ctx)
	p := cachedProvider(t)
	p.opts.CertTTL = 2*time.Minute + 4*time.Second
	c := startClusters(t, ctx, p, 1)[0]
	e, root, inter, istiod := probesOn(t, ctx, p, c, pilot)

	// What the echo pod's ztunnel presents, dialled on its HBONE port by a mesh client.
	echo, ok := e.Server(probe.EchoLocal, c.Name)
	require.True(t, ok)
	sock, err := addrmap.Socket(echo.IP)
	require.NoError(t, err)
	prober, err := inter.Issue(workload.ProbeNamespace, "client", time.Hour)
	require.NoError(t, err)
	echoID := pki.SPIFFEID(workload.ProbeNamespace, "echo")
	presented := func() *x509.Certificate {
		conn, err := tls.Dial("tcp", net.JoinHostPort(sock.String(), strconv.Itoa(dataplane.HBONEPort)), pki.ClientConfig(prober, root.Pool(), echoID))
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}

	// A client that keeps its connection (through the client's ztunnel, one HBONE stream), and
	// one that opens a new connection per request.
	kept := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	get := func(cl *http.Client) (reused bool) {
		var got httptrace.GotConnInfo
		tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { got = i }})
		served, err := probeapp.FetchServedBy(tctx, cl, e.URL(probe.EchoLocal))
		require.NoError(t, err)
		assert.Equal(t, c.Name, served)
		return got.Reused
	}
	get(kept)
	before, err := mesh.SamplerOf(istiod.Endpoints()).Scrape(ctx)
	require.NoError(t, err)

	cert := presented()
	for renewal := 1; renewal <= 2; renewal++ {
		half := cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 2)
		var next *x509.Certificate
		require.Eventually(t, func() bool {
			next = presented()
			return next.SerialNumber.Cmp(cert.SerialNumber) != 0
		}, 10*time.Second, 50*time.Millisecond, "renewal %d: the echo pod's certificate is renewed", renewal)
		seen := time.Now()
		// x509 keeps whole seconds: half may read up to a second early.
		assert.False(t, seen.Before(half.Add(-time.Second)), "renewal %d seen at %s, before half the lifetime (%s)", renewal, seen, half)
		assert.WithinDuration(t, half, seen, 2*time.Second, "renewal %d: at half the lifetime", renewal)
		assert.False(t, next.NotBefore.Before(cert.NotBefore), "renewal %d: a newer certificate (the handshake checked it is still %s)", renewal, echoID)
		assert.True(t, get(kept), "renewal %d: the connection opened before it still carries requests", renewal)
		get(fresh)
		cert = next
	}
	after, err := mesh.SamplerOf(istiod.Endpoints()).Scrape(ctx)
	require.NoError(t, err)
	// The echo pod's two renewals at least; the client pod's, the ztunnels' and the gateway's own
	// renew on the same schedule.
	assert.GreaterOrEqual(t, after.CertsIssued-before.CertsIssued, 2.0, "istiod signed each renewal")
}

// probesOn starts istiod (pilot) for c with a CA of its own and deploys the probes in c, ready.
func probesOn(t *testing.T, ctx context.Context, p *Provider, c *cluster.Cluster, pilot string) (*hostdataplane.Env, *pki.Root, *pki.Intermediate, cluster.Istiod) {
	t.Helper()
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))
	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate(c.Name)
	require.NoError(t, err)
	istiod, err := p.StartIstiod(ctx, c, cluster.IstiodOptions{CA: mesh.CACertsOf(inter), Binary: pilot, Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = istiod.Stop() })
	s := probe.Setup{Clusters: []*cluster.Cluster{c}, Local: c, Istiods: map[string]cluster.Istiod{c.Name: istiod},
		CAs: map[string]cluster.CACerts{c.Name: mesh.CACertsOf(inter)}, Roots: root.Pool(), Dir: t.TempDir(), Logf: t.Logf}
	pe, err := p.DeployProbes(ctx, s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pe.Close() })
	require.NoError(t, pe.Ready(ctx, time.Minute))
	return pe.(*hostdataplane.Env), root, inter, istiod
}
