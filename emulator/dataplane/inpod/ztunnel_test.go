package inpod

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"istio.io/istio/pkg/zdsapi"

	"github.com/ambientmc/ambientmc/emulator/dataplane"
	"github.com/ambientmc/ambientmc/emulator/dataplane/identity"
	"github.com/ambientmc/ambientmc/emulator/dataplane/netns"
	"github.com/ambientmc/ambientmc/emulator/dataplane/netns/netnstest"
	"github.com/ambientmc/ambientmc/emulator/dataplane/zds/zdstest"
	"github.com/ambientmc/ambientmc/framework/pki"
)

// readiness records what Serve said about readiness, in order.
type readiness struct {
	mu   sync.Mutex
	said []bool
}

func (r *readiness) set(ready bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.said = append(r.said, ready)
}

func (r *readiness) now() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.said) > 0 && r.said[len(r.said)-1]
}

// serving starts a ztunnel whose certificates come from a test CA, serving the fake node agent's
// socket until the test ends, and accepts its first connection.
func serving(t *testing.T, dns string) (*Ztunnel, *zdstest.Listener, *zdstest.Agent, *readiness) {
	t.Helper()
	root, err := pki.NewRoot()
	require.NoError(t, err)
	ca, err := root.NewIntermediate("cluster-1")
	require.NoError(t, err)
	certs := identity.NewSecretManager(func(id string) (*pki.Cert, error) {
		// spiffe://cluster.local/ns/<ns>/sa/<sa>
		parts := strings.Split(id, "/")
		if len(parts) != 7 {
			return nil, errors.New("not a SPIFFE ID: " + id)
		}
		return ca.Issue(parts[4], parts[6], time.Hour)
	}, t.Logf)
	t.Cleanup(certs.Close)
	z := New(Config{Cluster: "cluster-1", Network: "network-1", Roots: root.Pool(), Certs: certs, DNS: dns, Metrics: NewMetrics(), Logf: t.Logf,
		View: func() *dataplane.View { return nil }})
	l := zdstest.Listen(t)
	r := &readiness{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = z.Serve(ctx, l.Path, r.set)
	}()
	t.Cleanup(func() { cancel(); <-done })
	a := l.Accept(t)
	a.ReadHello()
	return z, l, a, r
}

var info = &zdsapi.WorkloadInfo{Name: "echo-0", Namespace: "probe", ServiceAccount: "echo"}

// As ztunnel's state manager (src/inpod/statemanager.rs process_msg): a Keep only names a pod of
// the snapshot, served or not; the ztunnel is ready once the snapshot is in, not at the hello.
func TestSnapshotKeepsAndReadiness(t *testing.T) {
	_, _, a, r := serving(t, "")
	assert.False(t, r.now(), "ready before the snapshot")
	assert.Equal(t, "", a.Request(zdstest.Keep("uid-unknown")).GetError(), "a Keep of a pod this ztunnel does not serve is acked")
	assert.False(t, r.now(), "ready before the snapshot")
	assert.Equal(t, "", a.Request(zdstest.SnapshotSent()).GetError())
	assert.True(t, r.now(), "not ready after the snapshot")
}

// A Keep or a second SnapshotSent after the snapshot is a protocol error: acked as one, the
// connection ends (ztunnel exits), readiness goes, and the ztunnel dials again.
func TestProtocolErrorsAfterTheSnapshot(t *testing.T) {
	for name, req := range map[string]*zdsapi.WorkloadRequest{"keep": zdstest.Keep("uid-1"), "second snapshot": zdstest.SnapshotSent()} {
		t.Run(name, func(t *testing.T) {
			_, l, a, r := serving(t, "")
			a.Request(zdstest.SnapshotSent())
			require.True(t, r.now())
			assert.NotEmpty(t, a.Request(req).GetError())
			_, err := zdstest.ReadProto[zdsapi.WorkloadResponse](a.U, zdstest.Wait)
			assert.ErrorIs(t, err, io.EOF, "the ztunnel ends the connection")
			assert.False(t, r.now(), "ready without a connection")
			again := l.Accept(t)
			again.ReadHello()
		})
	}
}

// An Add that fails holds readiness, as ztunnel's pending workloads do, until a Del lets it go.
func TestAFailedAddHoldsReadiness(t *testing.T) {
	_, _, a, r := serving(t, "")
	notANamespace, w, err := os.Pipe()
	require.NoError(t, err)
	defer w.Close()
	ack := a.Request(zdstest.Add("uid-1", info), int(notANamespace.Fd()))
	notANamespace.Close()
	assert.NotEmpty(t, ack.GetError(), "an add into what is not a network namespace fails")
	a.Request(zdstest.SnapshotSent())
	assert.False(t, r.now(), "ready with a failed add")
	assert.Equal(t, "", a.Request(zdstest.Del("uid-1")).GetError())
	assert.True(t, r.now(), "the failed pod's Del leaves nothing pending")
}

// istio-cni sends an Add for every pod at each reconnect: in the namespace the pod is served in,
// it changes nothing (ztunnel: "idempotency - no error if we already have a proxy"); in another
// namespace (a new sandbox) it replaces the pod.
func TestAddAgainInOneNamespaceChangesNothing(t *testing.T) {
	z, _, a, _ := serving(t, "")
	ns := netnstest.New(t)
	require.Equal(t, "", a.Request(zdstest.Add("uid-1", info), int(ns.Fd())).GetError())
	outbound := "127.0.0.1:" + strconv.Itoa(OutboundPort)
	dial := netns.FromFile(ns).Dialer(false)
	c, err := dial(context.Background(), "tcp", outbound)
	require.NoError(t, err, "the pod's outbound listener")
	c.Close()

	again, err := os.Open("/proc/self/fd/" + strconv.Itoa(int(ns.Fd()))) // another file of the same namespace
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, "", a.Request(zdstest.Add("uid-1", info), int(again.Fd())).GetError(), "an Add again in the same namespace is acked")
	assert.Equal(t, 1, z.Pods())
	c, err = dial(context.Background(), "tcp", outbound)
	require.NoError(t, err, "the pod still served")
	c.Close()

	other := netnstest.New(t)
	assert.Equal(t, "", a.Request(zdstest.Add("uid-1", info), int(other.Fd())).GetError())
	assert.Equal(t, 1, z.Pods())
	_, err = dial(context.Background(), "tcp", outbound)
	assert.Error(t, err, "the pod's old namespace is no longer served")
	c, err = netns.FromFile(other).Dialer(false)(context.Background(), "tcp", outbound)
	require.NoError(t, err, "the pod served in its new namespace")
	c.Close()
}

// A Del ends every connection of the pod at once, as ztunnel's DrainMode::Immediate does: here a
// DNS-over-TCP connection whose upstream would hold it open.
func TestDelEndsThePodsConnections(t *testing.T) {
	ns := netnstest.New(t)
	upstream, err := netns.FromFile(ns).Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer upstream.Close()
	go func() {
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answering
		}
	}()
	_, _, a, _ := serving(t, upstream.Addr().String())
	require.Equal(t, "", a.Request(zdstest.Add("uid-1", info), int(ns.Fd())).GetError())
	c, err := netns.FromFile(ns).Dialer(false)(context.Background(), "tcp", "127.0.0.1:"+strconv.Itoa(DNSPort))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "the connection is open before the Del")

	require.Equal(t, "", a.Request(zdstest.Del("uid-1")).GetError())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(zdstest.Wait)))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the Del ended the connection")
}
