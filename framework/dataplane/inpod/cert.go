package inpod

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// Backoff of a pod's certificate request, as ztunnel retries its CA: the first retry soon, then
// doubling up to a ceiling, for as long as the pod is served.
const (
	certRetryFirst = 100 * time.Millisecond
	certRetryMax   = 5 * time.Second
)

// podCert is a pod's certificate, requested in the background and retried until istiod's CA
// issues it: a pod is served from its add on, and a connection that needs the certificate waits
// for it (ztunnel acknowledges an add before its certificate arrives, too).
type podCert struct {
	ready chan struct{} // closed once cert is set
	stop  chan struct{} // closed when the pod is no longer served

	mu      sync.Mutex
	cert    *pki.Cert
	lastErr error
}

// fetchCert starts requesting a certificate with request until it succeeds or close is called;
// logf reports each failed attempt.
func fetchCert(request func() (*pki.Cert, error), logf func(format string, args ...any)) *podCert {
	c := &podCert{ready: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		wait := certRetryFirst
		for attempts := 1; ; attempts++ {
			cert, err := request()
			c.mu.Lock()
			if err == nil {
				c.cert = cert
			}
			c.lastErr = err
			c.mu.Unlock()
			if err == nil {
				close(c.ready)
				return
			}
			logf("certificate request %d failed, retrying in %s: %v", attempts, wait, err)
			select {
			case <-c.stop:
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, certRetryMax)
		}
	}()
	return c
}

// get waits for the certificate, at most until ctx ends; the error then names the last failure.
func (c *podCert) get(ctx context.Context) (*pki.Cert, error) {
	select {
	case <-c.ready:
		return c.cert, nil
	case <-c.stop:
		return nil, errors.New("the pod is no longer served")
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		return nil, errors.Join(errors.New("no certificate yet"), c.lastErr, ctx.Err())
	}
}

// close stops the requests.
func (c *podCert) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
}

// handshakeWait bounds how long an inbound handshake waits for the pod's certificate.
const handshakeWait = 10 * time.Second

// serverConfig is the pod's HBONE server TLS: each handshake waits for the certificate.
func (c *podCert) serverConfig(roots *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			ctx, cancel := context.WithTimeout(hello.Context(), handshakeWait)
			defer cancel()
			cert, err := c.get(ctx)
			if err != nil {
				return nil, err
			}
			return pki.ServerConfig(cert, roots), nil
		},
	}
}
