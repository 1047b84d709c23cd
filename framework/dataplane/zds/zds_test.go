package zds

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"istio.io/istio/pkg/zdsapi"
)

// fakeServer speaks the server side as istio-cni's ztunnelserver_linux.go does (its
// ztunnelUDSConnection): a unixpacket listener, requests written with WriteMsgUnix carrying the
// netns fd in SCM_RIGHTS, and hello and acks read into a 1024-byte buffer that rejects truncated
// messages. Istio's own server type is unexported and needs a pod cache and a Kubernetes client.
// Its SendMsgAndWaitForAck is split here into send and readAck so one goroutine drives both ends.
type fakeServer struct {
	t *testing.T
	u *net.UnixConn
}

// connect listens like newZtunnelServer, dials it with Dial and accepts the connection.
func connect(t *testing.T) (*fakeServer, *Conn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ztunnel.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, l.SetDeadline(time.Now().Add(5*time.Second)))
	u, err := l.AcceptUnix()
	require.NoError(t, err)
	t.Cleanup(func() { u.Close() })
	return &fakeServer{t: t, u: u}, c
}

// readProto is the server's readProto: a 1024-byte buffer, truncation is an error.
func readProto[T any, PT interface {
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

func (s *fakeServer) readHello() *zdsapi.ZdsHello {
	s.t.Helper()
	m, err := readProto[zdsapi.ZdsHello](s.u, 5*time.Second)
	require.NoError(s.t, err)
	return m
}

// send writes one request with the given descriptors attached (the server attaches at most one).
func (s *fakeServer) send(req *zdsapi.WorkloadRequest, fds ...int) {
	s.t.Helper()
	data, err := proto.Marshal(req)
	require.NoError(s.t, err)
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	require.NoError(s.t, s.u.SetWriteDeadline(time.Now().Add(5*time.Second)))
	_, _, err = s.u.WriteMsgUnix(data, rights, nil)
	require.NoError(s.t, err)
}

func (s *fakeServer) readAck() *zdsapi.Ack {
	s.t.Helper()
	m, err := readProto[zdsapi.WorkloadResponse](s.u, 5*time.Second)
	require.NoError(s.t, err)
	require.NotNil(s.t, m.GetAck(), "response is not an ack: %v", m)
	return m.GetAck()
}

// checkAlive is the server's keepalive: a short read that must time out, since ztunnel sends
// nothing unasked.
func (s *fakeServer) checkAlive() error {
	_, err := readProto[zdsapi.WorkloadResponse](s.u, 10*time.Millisecond)
	return err
}

func addReq(uid string, info *zdsapi.WorkloadInfo) *zdsapi.WorkloadRequest {
	return &zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_Add{Add: &zdsapi.AddWorkload{Uid: uid, WorkloadInfo: info}}}
}

func delReq(uid string) *zdsapi.WorkloadRequest {
	return &zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_Del{Del: &zdsapi.DelWorkload{Uid: uid}}}
}

// pipe returns a pipe whose read end stands in for a netns fd: what is written to w can be read
// from every copy of r, and writing fails with EPIPE once all copies of r are closed.
func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// allReadersClosed reports whether every copy of a pipe's read end is closed (the caller closed
// its own), by writing to the pipe (Go ignores SIGPIPE for such writes).
func allReadersClosed(t *testing.T, w *os.File) bool {
	t.Helper()
	_, err := w.Write([]byte("x"))
	if err == nil {
		return false
	}
	require.ErrorIs(t, err, syscall.EPIPE)
	return true
}

// A whole session as istio-cni runs it: hello, a snapshot of Add and Keep closed by
// SnapshotSent, then a live Del, each acked in turn with the ack text reaching the server.
func TestSession(t *testing.T) {
	s, c := connect(t)
	assert.Equal(t, zdsapi.Version_V1, s.readHello().GetVersion())

	r, w := pipe(t)
	info := &zdsapi.WorkloadInfo{Name: "echo-0", Namespace: "probe", ServiceAccount: "echo"}
	s.send(addReq("uid-1", info), int(r.Fd()))
	ev, err := c.Next()
	require.NoError(t, err)
	require.Equal(t, Add, ev.Kind)
	assert.Equal(t, "uid-1", ev.UID)
	assert.True(t, proto.Equal(info, ev.Info), "info %v, want %v", ev.Info, info)
	require.NotNil(t, ev.Netns)
	// The descriptor is the server's file, not just a number: bytes written on the server's side
	// come out of it.
	_, err = w.Write([]byte("hi"))
	require.NoError(t, err)
	got := make([]byte, 2)
	_, err = io.ReadFull(ev.Netns, got)
	require.NoError(t, err)
	assert.Equal(t, "hi", string(got))
	require.NoError(t, ev.Netns.Close())
	require.NoError(t, c.Ack(""))
	assert.Equal(t, "", s.readAck().GetError())

	s.send(&zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_Keep{Keep: &zdsapi.KeepWorkload{Uid: "uid-2"}}})
	ev, err = c.Next()
	require.NoError(t, err)
	assert.Equal(t, Event{Kind: Keep, UID: "uid-2"}, ev)
	require.NoError(t, c.Ack(""))
	s.readAck()

	s.send(&zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_SnapshotSent{SnapshotSent: &zdsapi.SnapshotSent{}}})
	ev, err = c.Next()
	require.NoError(t, err)
	assert.Equal(t, Event{Kind: SnapshotSent}, ev)
	require.NoError(t, c.Ack("reconcile failed"))
	assert.Equal(t, "reconcile failed", s.readAck().GetError())

	// Between requests ztunnel is silent, as the server's keepalive read requires.
	assert.ErrorIs(t, s.checkAlive(), os.ErrDeadlineExceeded)

	s.send(delReq("uid-1"))
	ev, err = c.Next()
	require.NoError(t, err)
	assert.Equal(t, Event{Kind: Del, UID: "uid-1"}, ev)
	require.NoError(t, c.Ack(""))
	s.readAck()
}

// An Add must carry exactly one netns: none or two is an error, and any descriptors that came are
// closed rather than leaked.
func TestAddNeedsOneDescriptor(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		s, c := connect(t)
		s.readHello()
		s.send(addReq("uid-1", nil))
		_, err := c.Next()
		assert.ErrorContains(t, err, "0 descriptors")
	})
	t.Run("two", func(t *testing.T) {
		s, c := connect(t)
		s.readHello()
		r1, w1 := pipe(t)
		r2, w2 := pipe(t)
		s.send(addReq("uid-1", nil), int(r1.Fd()), int(r2.Fd()))
		r1.Close()
		r2.Close()
		_, err := c.Next()
		assert.ErrorContains(t, err, "2 descriptors")
		assert.True(t, allReadersClosed(t, w1), "first descriptor leaked")
		assert.True(t, allReadersClosed(t, w2), "second descriptor leaked")
	})
}

// A descriptor attached to a request that takes none is closed, and the request still parses.
func TestStrayDescriptorClosed(t *testing.T) {
	s, c := connect(t)
	s.readHello()
	r, w := pipe(t)
	s.send(delReq("uid-1"), int(r.Fd()))
	r.Close()
	ev, err := c.Next()
	require.NoError(t, err)
	assert.Equal(t, Event{Kind: Del, UID: "uid-1"}, ev)
	assert.True(t, allReadersClosed(t, w), "descriptor leaked")
}

// The server reads acks into 1024 bytes and rejects longer ones, so a long error is cut to fit.
func TestLongAckFitsServerBuffer(t *testing.T) {
	s, c := connect(t)
	s.readHello()
	s.send(delReq("uid-1"))
	_, err := c.Next()
	require.NoError(t, err)
	long := strings.Repeat("é", 3000) // 6000 bytes, two per rune
	require.NoError(t, c.Ack(long))
	got := s.readAck().GetError()
	assert.NotEmpty(t, got)
	assert.True(t, strings.HasPrefix(long, got), "ack text is not a prefix of the error")
}

// Acks follow requests one for one: an ack with nothing to answer would make the server drop the
// connection, and reading on without acking would desynchronise it.
func TestAckLockStep(t *testing.T) {
	s, c := connect(t)
	s.readHello()
	assert.ErrorContains(t, c.Ack(""), "no request")
	assert.ErrorIs(t, s.checkAlive(), os.ErrDeadlineExceeded, "an unsolicited ack reached the server")

	s.send(delReq("uid-1"))
	_, err := c.Next()
	require.NoError(t, err)
	_, err = c.Next()
	assert.ErrorContains(t, err, "not acked")
	require.NoError(t, c.Ack(""))
	s.readAck()
	assert.ErrorContains(t, c.Ack(""), "no request")
}

// When istio-cni goes away Next returns an error, so the caller can redial.
func TestServerClose(t *testing.T) {
	s, c := connect(t)
	s.readHello()
	require.NoError(t, s.u.Close())
	_, err := c.Next()
	assert.ErrorIs(t, err, io.EOF)
}
