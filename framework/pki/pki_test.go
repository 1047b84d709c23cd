package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"istio.io/istio/security/pkg/pki/ca"
	"istio.io/istio/security/pkg/pki/util"
)

// mesh is one root with two cluster intermediates, shared by tests that do
// not care about freshness (key generation is cheap, but not free on 2 cores).
type mesh struct {
	root   *Root
	c1, c2 *Intermediate
}

func newMesh(t *testing.T) mesh {
	t.Helper()
	root, err := NewRoot()
	require.NoError(t, err)
	c1, err := root.NewIntermediate("cluster-1")
	require.NoError(t, err)
	c2, err := root.NewIntermediate("cluster-2")
	require.NoError(t, err)
	return mesh{root: root, c1: c1, c2: c2}
}

func issue(t *testing.T, i *Intermediate, ns, sa string) *Cert {
	t.Helper()
	c, err := i.Issue(ns, sa, time.Hour)
	require.NoError(t, err)
	return c
}

type side struct {
	state tls.ConnectionState
	err   error
	// readErr is the client's first read after the handshake: in TLS 1.3 the
	// client finishes first and learns of a refusal only there.
	readErr error
}

// handshake runs one TLS handshake over a 127.0.0.1 listener and returns what
// each side saw.
func handshake(t *testing.T, server, client *tls.Config) (srv, cli side) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	done := make(chan side, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- side{err: err}
			return
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		conn := tls.Server(raw, server)
		err = conn.Handshake()
		done <- side{state: conn.ConnectionState(), err: err}
	}()

	d := &net.Dialer{Timeout: 10 * time.Second}
	raw, err := d.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	conn := tls.Client(raw, client)
	cli.err = conn.Handshake()
	cli.state = conn.ConnectionState()
	srv = <-done
	if cli.err == nil {
		_, cli.readErr = conn.Read(make([]byte, 1))
	}
	return srv, cli
}

func TestSPIFFEID(t *testing.T) {
	assert.Equal(t, "spiffe://cluster.local/ns/istio-system/sa/istio-eastwestgateway",
		SPIFFEID("istio-system", "istio-eastwestgateway"))
}

func TestHandshakeAcrossClusterIntermediates(t *testing.T) {
	m := newMesh(t)
	server := issue(t, m.c1, "echo", "server")
	client := issue(t, m.c2, "fortio", "client")

	srv, cli := handshake(t,
		ServerConfig(server, m.root.Pool(), client.ID),
		ClientConfig(client, m.root.Pool(), server.ID))
	require.NoError(t, srv.err)
	require.NoError(t, cli.err)

	got, err := PeerID(srv.state)
	require.NoError(t, err)
	assert.Equal(t, "spiffe://cluster.local/ns/fortio/sa/client", got, "server sees the client")
	got, err = PeerID(cli.state)
	require.NoError(t, err)
	assert.Equal(t, "spiffe://cluster.local/ns/echo/sa/server", got, "client sees the server")

	// ztunnel's wire settings.
	assert.Equal(t, uint16(tls.VersionTLS13), cli.state.Version)
	assert.Equal(t, "h2", cli.state.NegotiatedProtocol)
	assert.False(t, cli.state.DidResume)
}

func TestHandshakeAnyIdentityInTrustDomain(t *testing.T) {
	m := newMesh(t)
	server := issue(t, m.c1, "echo", "server")
	client := issue(t, m.c2, "fortio", "client")
	srv, cli := handshake(t, ServerConfig(server, m.root.Pool()), ClientConfig(client, m.root.Pool()))
	require.NoError(t, srv.err)
	require.NoError(t, cli.err)
}

func TestServerRefusesForeignRootClient(t *testing.T) {
	m := newMesh(t)
	other := newMesh(t)
	server := issue(t, m.c1, "echo", "server")
	// Same identity the server allows, but from another mesh's root.
	intruder := issue(t, other.c1, "fortio", "client")

	// The client trusts both roots so that only the server's check can fail.
	both := other.root.Pool()
	both.AddCert(m.root.Cert)
	srv, cli := handshake(t,
		ServerConfig(server, m.root.Pool(), intruder.ID),
		ClientConfig(intruder, both, server.ID))
	require.Error(t, srv.err)
	assert.Contains(t, srv.err.Error(), "does not chain to the mesh root")
	assert.Contains(t, srv.err.Error(), intruder.ID)
	require.NoError(t, cli.err, "the client accepted the server")
	assert.ErrorContains(t, cli.readErr, "bad certificate", "the client is told it was refused")
}

func TestServerRequiresClientCert(t *testing.T) {
	m := newMesh(t)
	server := issue(t, m.c1, "echo", "server")
	client := ClientConfig(issue(t, m.c1, "fortio", "client"), m.root.Pool())
	client.Certificates = nil

	srv, _ := handshake(t, ServerConfig(server, m.root.Pool()), client)
	require.Error(t, srv.err)
	assert.Contains(t, srv.err.Error(), "client didn't provide a certificate")
}

func TestClientRefusesWrongServerIdentity(t *testing.T) {
	m := newMesh(t)
	impostor := issue(t, m.c1, "echo", "other")
	client := issue(t, m.c2, "fortio", "client")
	want := SPIFFEID("echo", "server")

	_, cli := handshake(t,
		ServerConfig(impostor, m.root.Pool()),
		ClientConfig(client, m.root.Pool(), want))
	require.Error(t, cli.err)
	assert.Contains(t, cli.err.Error(), impostor.ID, "names the identity seen")
	assert.Contains(t, cli.err.Error(), want, "names the identity expected")
}

func TestVerifySPIFFERejectsOtherTrustDomain(t *testing.T) {
	m := newMesh(t)
	// Signed by the mesh's own intermediate, so only the trust domain is wrong.
	certPEM, _, err := util.GenCertKeyFromOptions(util.CertOptions{
		Host:       "spiffe://other.domain/ns/echo/sa/server",
		SignerCert: m.c1.Cert,
		SignerPriv: m.c1.key,
		TTL:        time.Hour,
		IsServer:   true,
		ECSigAlg:   util.EcdsaSigAlg,
	})
	require.NoError(t, err)
	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block)
	raw := [][]byte{block.Bytes, m.c1.Cert.Raw}

	err = VerifySPIFFE(m.root.Pool())(raw, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spiffe://other.domain/ns/echo/sa/server")
	assert.Contains(t, err.Error(), "spiffe://cluster.local/")

	// The same chain passes once its identity is explicitly allowed.
	assert.NoError(t, VerifySPIFFE(m.root.Pool(), "spiffe://other.domain/ns/echo/sa/server")(raw, nil))
}

func TestVerifySPIFFENeedsIntermediateFromChain(t *testing.T) {
	m := newMesh(t)
	c := issue(t, m.c1, "echo", "server")
	// The root pool alone cannot reach the leaf without the presented intermediate.
	err := VerifySPIFFE(m.root.Pool())([][]byte{c.TLS.Certificate[0]}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), c.ID)
	assert.NoError(t, VerifySPIFFE(m.root.Pool())(c.TLS.Certificate, nil))
}

func TestChainAndIntermediate(t *testing.T) {
	m := newMesh(t)
	c := issue(t, m.c1, "echo", "server")

	chain, _, err := util.ParsePemEncodedCertificateChain(c.ChainPEM)
	require.NoError(t, err)
	require.Len(t, chain, 2)
	leaf, inter := chain[0], chain[1]
	assert.False(t, leaf.IsCA)
	assert.Empty(t, leaf.Subject.String(), "istiod leaves have an empty subject")
	ids, err := util.ExtractIDs(leaf.Extensions)
	require.NoError(t, err)
	assert.Equal(t, []string{c.ID}, ids)
	assert.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, leaf.ExtKeyUsage)
	assert.IsType(t, &ecdsa.PublicKey{}, leaf.PublicKey)
	assert.Equal(t, elliptic.P256(), leaf.PublicKey.(*ecdsa.PublicKey).Curve)
	assert.NoError(t, leaf.CheckSignatureFrom(inter))
	assert.Equal(t, leaf.Raw, c.TLS.Leaf.Raw)
	assert.Len(t, c.TLS.Certificate, 2)
	assert.WithinDuration(t, time.Now().Add(time.Hour), leaf.NotAfter, time.Minute)

	assert.Equal(t, m.c1.Cert.Raw, inter.Raw)
	assert.True(t, inter.IsCA)
	assert.True(t, inter.MaxPathLenZero)
	assert.Equal(t, []string{"cluster-1"}, inter.Subject.Locality)
	assert.Equal(t, []string{"istiod.istio-system.svc"}, inter.DNSNames)
	assert.NoError(t, inter.CheckSignatureFrom(m.root.Cert))
	assert.True(t, m.root.Cert.IsCA)
	assert.Equal(t, []string{"ambientmc"}, m.root.Cert.Subject.Organization)
	assert.Greater(t, time.Until(m.root.Cert.NotAfter), 9*365*24*time.Hour)

	// The intermediate's cert-chain.pem is intermediate then root.
	ichain, _, err := util.ParsePemEncodedCertificateChain(m.c1.ChainPEM)
	require.NoError(t, err)
	require.Len(t, ichain, 2)
	assert.Equal(t, m.c1.Cert.Raw, ichain[0].Raw)
	assert.Equal(t, m.root.Cert.Raw, ichain[1].Raw)
	assert.Equal(t, m.root.CertPEM, m.c1.RootPEM)
}

func TestIssueRejectsEmptyIdentity(t *testing.T) {
	m := newMesh(t)
	_, err := m.c1.Issue("", "sa", 0)
	assert.Error(t, err)
	_, err = m.root.NewIntermediate("")
	assert.Error(t, err)
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, want, st.Mode().Perm(), path)
}

func TestWriteCACerts(t *testing.T) {
	m := newMesh(t)
	dir := filepath.Join(t.TempDir(), "cacerts")
	// A pre-existing world-readable key must not keep its mode.
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca-key.pem"), []byte("old"), 0o644))
	require.NoError(t, m.c1.WriteCACerts(dir))

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"ca-cert.pem", "ca-key.pem", "cert-chain.pem", "root-cert.pem"}, names)
	assertMode(t, filepath.Join(dir, "ca-key.pem"), 0o600)
	assertMode(t, dir, 0o700)

	_, _, err = util.LoadSignerCredsFromFiles(filepath.Join(dir, "ca-cert.pem"), filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	root, err := os.ReadFile(filepath.Join(dir, "root-cert.pem"))
	require.NoError(t, err)
	assert.Equal(t, m.root.CertPEM, root)

	fresh := filepath.Join(t.TempDir(), "a", "b")
	require.NoError(t, m.c2.WriteCACerts(fresh))
	assertMode(t, fresh, 0o700)
}

// TestIstioCAAcceptsBundle loads the written files the way istiod loads a
// plugged-in CA and issues a workload certificate from them.
func TestIstioCAAcceptsBundle(t *testing.T) {
	m := newMesh(t)
	dir := t.TempDir()
	require.NoError(t, m.c1.WriteCACerts(dir))

	opts, err := ca.NewPluggedCertIstioCAOptions(ca.SigningCAFileBundle{
		RootCertFile:    filepath.Join(dir, "root-cert.pem"),
		CertChainFiles:  []string{filepath.Join(dir, "cert-chain.pem")},
		SigningCertFile: filepath.Join(dir, "ca-cert.pem"),
		SigningKeyFile:  filepath.Join(dir, "ca-key.pem"),
	}, 24*time.Hour, 90*24*time.Hour, 2048)
	require.NoError(t, err)
	istioCA, err := ca.NewIstioCA(opts)
	require.NoError(t, err)

	id := SPIFFEID("echo", "server")
	chainPEM, keyPEM, err := istioCA.GenKeyCert([]string{id}, time.Hour, false)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(chainPEM, keyPEM)
	require.NoError(t, err)
	assert.IsType(t, &ecdsa.PrivateKey{}, pair.PrivateKey, "EC intermediate gives EC leaves")

	// istiod's certificate passes the same SPIFFE check as ours.
	require.NoError(t, VerifySPIFFE(m.root.Pool(), id)(pair.Certificate, nil))

	// And one of ours has the same shape as istiod's.
	ours := issue(t, m.c1, "echo", "server")
	theirs, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	assert.Equal(t, theirs.Subject.String(), ours.TLS.Leaf.Subject.String())
	assert.Equal(t, theirs.ExtKeyUsage, ours.TLS.Leaf.ExtKeyUsage)
	assert.Equal(t, theirs.KeyUsage, ours.TLS.Leaf.KeyUsage)
}

func TestCACertsSecret(t *testing.T) {
	m := newMesh(t)
	s := m.c1.CACertsSecret()
	assert.Equal(t, "cacerts", s.Name)
	assert.Equal(t, "istio-system", s.Namespace)
	require.Len(t, s.Data, 4)
	assert.Equal(t, m.c1.CertPEM, s.Data["ca-cert.pem"])
	assert.Equal(t, m.c1.KeyPEM, s.Data["ca-key.pem"])
	assert.Equal(t, m.c1.ChainPEM, s.Data["cert-chain.pem"])
	assert.Equal(t, m.root.CertPEM, s.Data["root-cert.pem"])
}

func TestCertWriteDir(t *testing.T) {
	m := newMesh(t)
	c := issue(t, m.c1, "istio-system", "ztunnel")
	dir := filepath.Join(t.TempDir(), "certs")
	require.NoError(t, c.WriteDir(dir))

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"cert-chain.pem", "key.pem", "root-cert.pem"}, names)
	assertMode(t, filepath.Join(dir, "key.pem"), 0o600)
	assertMode(t, dir, 0o700)

	// What adsc does with Config.CertDir.
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert-chain.pem"), filepath.Join(dir, "key.pem"))
	require.NoError(t, err)
	require.NoError(t, VerifySPIFFE(m.root.Pool(), c.ID)(pair.Certificate, nil))
	root, err := os.ReadFile(filepath.Join(dir, "root-cert.pem"))
	require.NoError(t, err)
	assert.Equal(t, m.root.CertPEM, root)
}

// An intermediate loaded from its cacerts files signs what the original would: a workload
// certificate that verifies against the root.
func TestLoadIntermediateFromCACerts(t *testing.T) {
	root, err := NewRoot()
	require.NoError(t, err)
	orig, err := root.NewIntermediate("cluster-1")
	require.NoError(t, err)
	loaded, err := LoadIntermediate("cluster-1", orig.CertPEM, orig.KeyPEM, orig.ChainPEM, orig.RootPEM)
	require.NoError(t, err)
	c, err := loaded.Issue("ns", "sa", 0)
	require.NoError(t, err)
	inter := x509.NewCertPool()
	inter.AddCert(orig.Cert)
	_, err = c.TLS.Leaf.Verify(x509.VerifyOptions{Roots: root.Pool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	require.NoError(t, err)

	_, err = LoadIntermediate("cluster-1", c.ChainPEM, c.KeyPEM, nil, orig.RootPEM)
	require.ErrorContains(t, err, "not a CA")
}
