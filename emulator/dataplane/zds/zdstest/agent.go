// Package zdstest is istio-cni's node agent's side of ZDS, for tests: it listens and speaks as
// istio-cni's ztunnelserver_linux.go does (its ztunnelUDSConnection): a unixpacket listener,
// requests written with WriteMsgUnix carrying the netns fd in SCM_RIGHTS, and hello and acks read
// into a 1024-byte buffer that rejects truncated messages. Istio's own server type is unexported
// and needs a pod cache and a Kubernetes client. Its SendMsgAndWaitForAck is split here into Send
// and ReadAck so one goroutine can drive both ends.
package zdstest

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"istio.io/istio/pkg/zdsapi"
)

// Wait bounds every read and write of the fake agent.
const Wait = 5 * time.Second

// Listener is the node agent's socket.
type Listener struct {
	Path string
	l    *net.UnixListener
}

// Listen opens the agent's socket in a test directory, as newZtunnelServer does.
func Listen(t *testing.T) *Listener {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ztunnel.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return &Listener{Path: path, l: l}
}

// Accept takes the next ztunnel connection.
func (l *Listener) Accept(t *testing.T) *Agent {
	t.Helper()
	require.NoError(t, l.l.SetDeadline(time.Now().Add(Wait)))
	u, err := l.l.AcceptUnix()
	require.NoError(t, err)
	t.Cleanup(func() { u.Close() })
	return &Agent{t: t, U: u}
}

// Agent is one ztunnel connection as the node agent holds it.
type Agent struct {
	t *testing.T
	U *net.UnixConn
}

// ReadProto is the server's readProto: a 1024-byte buffer, truncation is an error.
func ReadProto[T any, PT interface {
	proto.Message
	*T
}](u *net.UnixConn, timeout time.Duration) (PT, error) {
	var buf [1024]byte
	if err := u.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	n, _, flags, _, err := u.ReadMsgUnix(buf[:], nil)
	if err != nil {
		return nil, err
	}
	if flags&unix.MSG_TRUNC != 0 {
		return nil, errors.New("truncated message")
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return nil, errors.New("truncated control message")
	}
	var m T
	if err := proto.Unmarshal(buf[:n], PT(&m)); err != nil {
		return nil, err
	}
	return &m, nil
}

// ReadHello reads ztunnel's first message.
func (a *Agent) ReadHello() *zdsapi.ZdsHello {
	a.t.Helper()
	m, err := ReadProto[zdsapi.ZdsHello](a.U, Wait)
	require.NoError(a.t, err)
	return m
}

// Send writes one request with the given descriptors attached (the server attaches at most one).
func (a *Agent) Send(req *zdsapi.WorkloadRequest, fds ...int) {
	a.t.Helper()
	data, err := proto.Marshal(req)
	require.NoError(a.t, err)
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	require.NoError(a.t, a.U.SetWriteDeadline(time.Now().Add(Wait)))
	_, _, err = a.U.WriteMsgUnix(data, rights, nil)
	require.NoError(a.t, err)
}

// ReadAck reads ztunnel's answer to the last request.
func (a *Agent) ReadAck() *zdsapi.Ack {
	a.t.Helper()
	m, err := ReadProto[zdsapi.WorkloadResponse](a.U, Wait)
	require.NoError(a.t, err)
	require.NotNil(a.t, m.GetAck(), "response is not an ack: %v", m)
	return m.GetAck()
}

// Request sends req and returns ztunnel's ack.
func (a *Agent) Request(req *zdsapi.WorkloadRequest, fds ...int) *zdsapi.Ack {
	a.t.Helper()
	a.Send(req, fds...)
	return a.ReadAck()
}

// CheckAlive is the server's keepalive: a short read that must time out, since ztunnel sends
// nothing unasked.
func (a *Agent) CheckAlive() error {
	_, err := ReadProto[zdsapi.WorkloadResponse](a.U, 10*time.Millisecond)
	return err
}

// Add asks to serve pod uid (its netns travels as the request's descriptor).
func Add(uid string, info *zdsapi.WorkloadInfo) *zdsapi.WorkloadRequest {
	return &zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_Add{Add: &zdsapi.AddWorkload{Uid: uid, WorkloadInfo: info}}}
}

// Keep asks, during the snapshot, to keep pod uid.
func Keep(uid string) *zdsapi.WorkloadRequest {
	return &zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_Keep{Keep: &zdsapi.KeepWorkload{Uid: uid}}}
}

// Del asks to stop serving pod uid.
func Del(uid string) *zdsapi.WorkloadRequest {
	return &zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_Del{Del: &zdsapi.DelWorkload{Uid: uid}}}
}

// SnapshotSent ends the snapshot.
func SnapshotSent() *zdsapi.WorkloadRequest {
	return &zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_SnapshotSent{SnapshotSent: &zdsapi.SnapshotSent{}}}
}
