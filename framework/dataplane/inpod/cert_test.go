package inpod

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// issue returns certificates for service accounts of namespace probe, from one root.
func issue(t *testing.T, sas ...string) ([]*pki.Cert, *pki.Root) {
	t.Helper()
	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate("cluster-1")
	require.NoError(t, err)
	var certs []*pki.Cert
	for _, sa := range sas {
		c, err := inter.Issue("probe", sa, time.Hour)
		require.NoError(t, err)
		certs = append(certs, c)
	}
	return certs, root
}

// A certificate request that fails is retried with backoff until istiod's CA answers, and a
// handshake on the pod's HBONE port waits for it instead of failing.
func TestPodCertificateIsRetriedUntilIssued(t *testing.T) {
	certs, root := issue(t, "echo", "client")
	cert := certs[0]
	var calls atomic.Int32
	pc := fetchCert(func() (*pki.Cert, error) {
		if calls.Add(1) < 3 {
			return nil, errors.New("istiod: connection refused")
		}
		return cert, nil
	}, t.Logf)
	t.Cleanup(pc.close)

	// The pod's HBONE listener, up before the certificate: a client handshakes at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = tls.Server(c, pc.serverConfig(root.Pool())).Handshake()
	}()
	start := time.Now()
	conn, err := tls.Dial("tcp", l.Addr().String(), pki.ClientConfig(certs[1], root.Pool(), pki.SPIFFEID("probe", "echo")))
	require.NoError(t, err, "the handshake waits for the certificate")
	assert.Equal(t, "h2", conn.ConnectionState().NegotiatedProtocol)
	conn.Close()
	assert.GreaterOrEqual(t, time.Since(start), certRetryFirst+2*certRetryFirst, "two failed requests, then the backoff")

	got, err := pc.get(context.Background())
	require.NoError(t, err)
	assert.Same(t, cert, got)
	assert.EqualValues(t, 3, calls.Load(), "no request after the one that succeeded")
}

// A pod no longer served stops its requests, and a wait for a certificate that never comes ends
// with the last failure.
func TestPodCertificateRequestsStopWithThePod(t *testing.T) {
	var calls atomic.Int32
	pc := fetchCert(func() (*pki.Cert, error) {
		calls.Add(1)
		return nil, errors.New("istiod: permission denied")
	}, t.Logf)
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	_, err := pc.get(ctx)
	require.ErrorContains(t, err, "istiod: permission denied")

	pc.close()
	_, err = pc.get(context.Background())
	require.ErrorContains(t, err, "no longer served")
	n := calls.Load()
	time.Sleep(2 * certRetryFirst * 4)
	assert.Equal(t, n, calls.Load(), "no request after the pod went")
}
