package identity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// Concurrency is how many certificate requests one SecretManager has in flight at most, as
// ztunnel's SecretManager (istio/ztunnel src/identity/manager.rs, concurrency 8).
const Concurrency = 8

// Backoff of a failed request: the first retry soon, then doubling up to a ceiling, for as long
// as the identity is managed. ztunnel waits 60 s after a failure (CERT_REFRESH_FAILURE_RETRY_DELAY)
// and drops the certificate it had; the emulator retries sooner and keeps serving the one it has
// while it is valid, so that a node authorizer still catching up at setup costs a pod
// milliseconds, not a minute.
const (
	RetryFirst = 100 * time.Millisecond
	RetryMax   = 5 * time.Second
)

// minRenewal bounds how soon a certificate is renewed after it arrived. istiod backdates
// NotBefore by 2 minutes (util.ClockSkewGracePeriod), so a lifetime under that has passed half of
// itself on arrival: ztunnel would renew at once, in a loop; the emulator waits this long instead.
const minRenewal = time.Second

// SecretManager keeps one certificate per identity as ztunnel's SecretManager does
// (istio/ztunnel src/identity/manager.rs): the first ask for an identity starts fetching its
// certificate, every later ask gets the current one, and each is renewed at half its lifetime
// (src/tls/certificate.rs refresh_at: NotBefore + (NotAfter-NotBefore)/2) until the identity is
// forgotten. It is safe for concurrent use.
type SecretManager struct {
	fetch func(id string) (*pki.Cert, error)
	logf  func(format string, args ...any)
	slots chan struct{} // one per request in flight

	mu     sync.Mutex
	certs  map[string]*managed
	closed bool

	issued, renewed, failed atomic.Int64
}

// managed is one identity's certificate and the loop that keeps it.
type managed struct {
	ready chan struct{} // closed once the first certificate is in
	stop  chan struct{} // closed when the identity is forgotten

	mu      sync.Mutex
	cert    *pki.Cert
	lastErr error
}

// NewSecretManager keeps the certificates fetch returns for an identity (a SPIFFE ID); logf
// reports each failed request.
func NewSecretManager(fetch func(id string) (*pki.Cert, error), logf func(format string, args ...any)) *SecretManager {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &SecretManager{fetch: fetch, logf: logf, slots: make(chan struct{}, Concurrency), certs: map[string]*managed{}}
}

// Prefetch starts managing id without waiting, as ztunnel's CertFetcher does for a workload that
// appears on its node.
func (m *SecretManager) Prefetch(id string) { m.manage(id) }

// Fetch returns id's current certificate, waiting for the first one at most until ctx ends; the
// error then names the last failed request.
func (m *SecretManager) Fetch(ctx context.Context, id string) (*pki.Cert, error) {
	c := m.manage(id)
	if c == nil {
		return nil, errors.New("identity: the secret manager is closed")
	}
	select {
	case <-c.ready:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.cert, nil
	case <-c.stop:
		return nil, fmt.Errorf("identity: %s was forgotten", id)
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		return nil, errors.Join(fmt.Errorf("identity: no certificate for %s yet", id), c.lastErr, ctx.Err())
	}
}

// Forget stops keeping id's certificate, as ztunnel does when the last workload of that identity
// leaves its node.
func (m *SecretManager) Forget(id string) {
	m.mu.Lock()
	c := m.certs[id]
	delete(m.certs, id)
	m.mu.Unlock()
	if c != nil {
		close(c.stop)
	}
}

// Close forgets every identity.
func (m *SecretManager) Close() {
	m.mu.Lock()
	certs := m.certs
	m.certs, m.closed = map[string]*managed{}, true
	m.mu.Unlock()
	for _, c := range certs {
		close(c.stop)
	}
}

// Has says whether id is kept and has its certificate, and why not yet: the last request's
// failure. Unlike Fetch it starts nothing.
func (m *SecretManager) Has(id string) (bool, error) {
	m.mu.Lock()
	c := m.certs[id]
	m.mu.Unlock()
	if c == nil {
		return false, fmt.Errorf("identity: %s is not kept", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert != nil, c.lastErr
}

// Held is how many identities have a certificate now.
func (m *SecretManager) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.certs {
		select {
		case <-c.ready:
			n++
		default:
		}
	}
	return n
}

// Stats count certificates received (Issued, of which Renewed replaced an earlier one of the same
// identity) and failed requests.
type Stats struct{ Issued, Renewed, Failed int64 }

// Stats says what the manager has asked for so far.
func (m *SecretManager) Stats() Stats {
	return Stats{Issued: m.issued.Load(), Renewed: m.renewed.Load(), Failed: m.failed.Load()}
}

// ServerConfig is a TLS server configuration that presents id's current certificate on each
// handshake, waiting up to wait for the first: an HBONE listener may be up before its
// certificate, and a renewed certificate serves the next handshake.
func (m *SecretManager) ServerConfig(id string, roots *x509.CertPool, wait time.Duration) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			ctx, cancel := context.WithTimeout(hello.Context(), wait)
			defer cancel()
			cert, err := m.Fetch(ctx, id)
			if err != nil {
				return nil, err
			}
			return pki.ServerConfig(cert, roots), nil
		},
	}
}

// manage returns id's entry, starting its loop on the first ask (nil once closed).
func (m *SecretManager) manage(id string) *managed {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if c := m.certs[id]; c != nil {
		return c
	}
	c := &managed{ready: make(chan struct{}), stop: make(chan struct{})}
	m.certs[id] = c
	go m.keep(id, c)
	return c
}

// keep fetches id's certificate, then renews it at half its lifetime, retrying failures with
// backoff, until the identity is forgotten.
func (m *SecretManager) keep(id string, c *managed) {
	wait := RetryFirst
	for attempt := 1; ; attempt++ {
		select {
		case m.slots <- struct{}{}:
		case <-c.stop:
			return
		}
		cert, err := m.fetch(id)
		<-m.slots
		var next time.Time
		if err == nil {
			next, err = renewAt(cert)
		}
		if err == nil {
			wait, attempt = RetryFirst, 0
			m.issued.Add(1)
		} else {
			m.failed.Add(1)
			m.logf("certificate for %s: request %d failed, retrying in %s: %v", id, attempt, wait, err)
			next, wait = time.Now().Add(wait), min(2*wait, RetryMax)
		}
		c.mu.Lock()
		if err == nil {
			if c.cert != nil {
				m.renewed.Add(1)
			} else {
				close(c.ready)
			}
			c.cert = cert
		}
		c.lastErr = err
		c.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// renewAt is when c is renewed: at half its lifetime, as ztunnel's refresh_at computes it, but
// never sooner than minRenewal from now.
func renewAt(c *pki.Cert) (time.Time, error) {
	leaf := c.TLS.Leaf
	if leaf == nil {
		if len(c.TLS.Certificate) == 0 {
			return time.Time{}, fmt.Errorf("identity: the certificate for %s holds no chain", c.ID)
		}
		var err error
		if leaf, err = x509.ParseCertificate(c.TLS.Certificate[0]); err != nil {
			return time.Time{}, fmt.Errorf("identity: the certificate for %s: %w", c.ID, err)
		}
	}
	half := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)
	return later(half, time.Now().Add(minRenewal)), nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Holders counts the pods a node proxy serves per identity: the first pod of an identity
// prefetches its certificate and the last one's going forgets it, as ztunnel's CertFetcher does
// (prefetch_cert; clear_cert when was_last_identity_on_node). Its owner's lock guards it.
type Holders struct {
	m    *SecretManager
	pods map[string]int
}

// Holders counts pods for m.
func (m *SecretManager) Holders() *Holders { return &Holders{m: m, pods: map[string]int{}} }

// Add counts a pod of identity id.
func (h *Holders) Add(id string) {
	if h.pods[id]++; h.pods[id] == 1 {
		h.m.Prefetch(id)
	}
}

// Drop counts a pod of identity id gone.
func (h *Holders) Drop(id string) {
	if h.pods[id]--; h.pods[id] <= 0 {
		delete(h.pods, id)
		h.m.Forget(id)
	}
}

// Len is how many identities have a pod.
func (h *Holders) Len() int { return len(h.pods) }
