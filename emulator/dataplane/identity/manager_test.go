package identity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// signer issues certificates as istiod's CA does (the same signing path: NotBefore backdated by
// 2 minutes), counting requests per identity.
type signer struct {
	inter *pki.Intermediate
	roots *x509.CertPool
	ttl   time.Duration
	fail  atomic.Bool // refuse every request while set

	mu    sync.Mutex
	calls map[string][]time.Time
}

func newSigner(t *testing.T, ttl time.Duration) *signer {
	t.Helper()
	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate("cluster-1")
	require.NoError(t, err)
	return &signer{inter: inter, roots: root.Pool(), ttl: ttl, calls: map[string][]time.Time{}}
}

func (s *signer) fetch(id string) (*pki.Cert, error) {
	s.mu.Lock()
	s.calls[id] = append(s.calls[id], time.Now())
	s.mu.Unlock()
	if s.fail.Load() {
		return nil, errors.New("istiod: unavailable")
	}
	// spiffe://cluster.local/ns/<ns>/sa/<sa>
	parts := strings.Split(id, "/")
	if len(parts) != 7 {
		return nil, fmt.Errorf("not a workload identity: %q", id)
	}
	return s.inter.Issue(parts[4], parts[6], s.ttl)
}

func (s *signer) requests(id string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.calls[id]...)
}

var echo = pki.SPIFFEID("probe", "echo")

// A certificate is renewed at half its lifetime, counted from its NotBefore as ztunnel's
// refresh_at counts it, and every ask in between gets the one held, without a request.
func TestCertificateIsRenewedAtHalfItsLifetime(t *testing.T) {
	// istiod backdates NotBefore by 2 minutes: 2m4s lives 2 s past its issue, half of it 2 s.
	s := newSigner(t, 2*time.Minute+4*time.Second)
	m := NewSecretManager(s.fetch, t.Logf)
	t.Cleanup(m.Close)

	first, err := m.Fetch(context.Background(), echo)
	require.NoError(t, err)
	leaf := first.TLS.Leaf
	half := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)
	for range 20 {
		got, err := m.Fetch(context.Background(), echo)
		require.NoError(t, err)
		require.Same(t, first, got, "asks before the renewal get the certificate held")
	}
	require.Len(t, s.requests(echo), 1, "one request for many asks")

	require.Eventually(t, func() bool { return len(s.requests(echo)) >= 2 }, 5*time.Second, 10*time.Millisecond)
	renewed := s.requests(echo)[1]
	assert.False(t, renewed.Before(half), "renewed at %s, before half its lifetime (%s)", renewed, half)
	assert.WithinDuration(t, half, renewed, 500*time.Millisecond, "renewed at half its lifetime")
	require.Eventually(t, func() bool {
		got, err := m.Fetch(context.Background(), echo)
		return err == nil && got != first
	}, time.Second, 10*time.Millisecond, "asks after the renewal get the new certificate")
	assert.Equal(t, Stats{Issued: 2, Renewed: 1}, m.Stats())
}

// A failed renewal keeps the certificate held (still valid) and is retried with backoff; a
// failed first request leaves a waiting ask with the failure.
func TestFailedRequestsAreRetriedKeepingTheHeldCertificate(t *testing.T) {
	s := newSigner(t, 2*time.Minute+2*time.Second)
	m := NewSecretManager(s.fetch, t.Logf)
	t.Cleanup(m.Close)
	first, err := m.Fetch(context.Background(), echo)
	require.NoError(t, err)

	s.fail.Store(true)
	require.Eventually(t, func() bool { return len(s.requests(echo)) >= 3 }, 5*time.Second, 10*time.Millisecond, "the renewal fails, and is retried")
	got, err := m.Fetch(context.Background(), echo)
	require.NoError(t, err)
	assert.Same(t, first, got, "the held certificate serves while renewals fail")
	calls := s.requests(echo)
	assert.GreaterOrEqual(t, calls[2].Sub(calls[1]), RetryFirst, "retried after the backoff")

	s.fail.Store(false)
	require.Eventually(t, func() bool {
		got, err := m.Fetch(context.Background(), echo)
		return err == nil && got != first
	}, 5*time.Second, 10*time.Millisecond, "the retry that succeeds replaces it")

	s.fail.Store(true)
	other := pki.SPIFFEID("probe", "client")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = m.Fetch(ctx, other)
	assert.ErrorContains(t, err, "istiod: unavailable", "an ask that times out names the last failure")
	assert.Positive(t, m.Stats().Failed)
}

// A lifetime under istiod's 2-minute backdating is half over on arrival: ztunnel would renew it
// at once, in a loop; the manager waits a second.
func TestAShortLifetimeIsNotRenewedInALoop(t *testing.T) {
	s := newSigner(t, time.Minute)
	m := NewSecretManager(s.fetch, t.Logf)
	t.Cleanup(m.Close)
	_, err := m.Fetch(context.Background(), echo)
	require.NoError(t, err)
	time.Sleep(minRenewal / 2)
	assert.Len(t, s.requests(echo), 1, "no renewal within %s", minRenewal/2)
}

// Forget stops an identity's renewals (a later ask starts anew); Prefetch starts one without
// waiting; Close ends every one.
func TestForgetStopsRenewalsAndPrefetchStartsThem(t *testing.T) {
	s := newSigner(t, 2*time.Minute+2*time.Second)
	m := NewSecretManager(s.fetch, t.Logf)
	t.Cleanup(m.Close)

	m.Prefetch(echo)
	require.Eventually(t, func() bool { return m.Held() == 1 }, 2*time.Second, 10*time.Millisecond, "prefetched without an ask")
	m.Forget(echo)
	assert.Zero(t, m.Held())
	n := len(s.requests(echo))
	time.Sleep(2 * time.Second)
	assert.Len(t, s.requests(echo), n, "no renewal of a forgotten identity")

	_, err := m.Fetch(context.Background(), echo)
	require.NoError(t, err)
	assert.Len(t, s.requests(echo), n+1, "asked again, it is fetched again")

	m.Close()
	_, err = m.Fetch(context.Background(), echo)
	assert.ErrorContains(t, err, "closed")
}

// At most Concurrency requests are in flight, however many identities are asked for at once.
func TestRequestsInFlightAreBounded(t *testing.T) {
	var inFlight, most atomic.Int32
	release := make(chan struct{})
	s := newSigner(t, time.Hour)
	m := NewSecretManager(func(id string) (*pki.Cert, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			old := most.Load()
			if n <= old || most.CompareAndSwap(old, n) {
				break
			}
		}
		<-release
		return s.fetch(id)
	}, t.Logf)
	t.Cleanup(m.Close)
	const ids = 3 * Concurrency
	for k := range ids {
		m.Prefetch(pki.SPIFFEID("probe", fmt.Sprintf("sa-%d", k)))
	}
	require.Eventually(t, func() bool { return inFlight.Load() == Concurrency }, 2*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	close(release)
	require.Eventually(t, func() bool { return m.Held() == ids }, 5*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, Concurrency, most.Load())
}

// The server configuration presents the identity's current certificate on each handshake,
// waiting for the first: a listener may be up before its certificate, and a renewal serves the
// next handshake.
func TestServerConfigPresentsTheCurrentCertificate(t *testing.T) {
	s := newSigner(t, 2*time.Minute+2*time.Second)
	s.fail.Store(true)
	m := NewSecretManager(s.fetch, t.Logf)
	t.Cleanup(m.Close)
	client, err := s.inter.Issue("probe", "client", time.Hour)
	require.NoError(t, err)
	roots := s.roots

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	cfg := m.ServerConfig(echo, roots, 5*time.Second)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = tls.Server(c, cfg).Handshake()
			}()
		}
	}()
	serial := func() string {
		conn, err := tls.Dial("tcp", l.Addr().String(), pki.ClientConfig(client, roots, echo))
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	time.AfterFunc(300*time.Millisecond, func() { s.fail.Store(false) })
	first := serial()
	require.Eventually(t, func() bool { return serial() != first }, 5*time.Second, 50*time.Millisecond, "the renewed certificate serves the next handshake")
}

// A node's first pod of an identity prefetches its certificate; the identity stays while any pod
// of it stays, and goes with the last (its renewals stop).
func TestHoldersKeepAnIdentityWhileAPodOfItStays(t *testing.T) {
	s := newSigner(t, time.Hour)
	m := NewSecretManager(s.fetch, t.Logf)
	t.Cleanup(m.Close)
	h := m.Holders()

	h.Add(echo)
	h.Add(echo)
	require.Eventually(t, func() bool { ok, _ := m.Has(echo); return ok }, 2*time.Second, 10*time.Millisecond, "prefetched with the first pod")
	h.Drop(echo)
	ok, _ := m.Has(echo)
	assert.True(t, ok, "one pod of it is left")
	assert.Equal(t, 1, h.Len())
	h.Drop(echo)
	ok, err := m.Has(echo)
	assert.False(t, ok, "forgotten with the last pod")
	assert.ErrorContains(t, err, "not kept")
	assert.Zero(t, h.Len())
	assert.Len(t, s.requests(echo), 1, "one request for both pods")
}
