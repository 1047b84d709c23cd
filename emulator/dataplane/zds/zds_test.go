package zds

import (
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"istio.io/istio/pkg/zdsapi"

	"github.com/ambientmc/ambientmc/emulator/dataplane/zds/zdstest"
)

// connect listens like istio-cni's node agent, dials it with Dial and accepts the connection.
func connect(t *testing.T) (*zdstest.Agent, *Conn) {
	t.Helper()
	l := zdstest.Listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), zdstest.Wait)
	defer cancel()
	c, err := Dial(ctx, l.Path)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return l.Accept(t), c
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
	assert.Equal(t, zdsapi.Version_V1, s.ReadHello().GetVersion())

	r, w := pipe(t)
	info := &zdsapi.WorkloadInfo{Name: "echo-0", Namespace: "probe", ServiceAccount: "echo"}
	s.Send(zdstest.Add("uid-1", info), int(r.Fd()))
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
	assert.Equal(t, "", s.ReadAck().GetError())

	s.Send(zdstest.Keep("uid-2"))
	ev, err = c.Next()
	require.NoError(t, err)
	assert.Equal(t, Event{Kind: Keep, UID: "uid-2"}, ev)
	require.NoError(t, c.Ack(""))
	s.ReadAck()

	s.Send(zdstest.SnapshotSent())
	ev, err = c.Next()
	require.NoError(t, err)
	assert.Equal(t, Event{Kind: SnapshotSent}, ev)
	require.NoError(t, c.Ack("reconcile failed"))
	assert.Equal(t, "reconcile failed", s.ReadAck().GetError())

	// Between requests ztunnel is silent, as the server's keepalive read requires.
	assert.ErrorIs(t, s.CheckAlive(), os.ErrDeadlineExceeded)

	s.Send(zdstest.Del("uid-1"))
	ev, err = c.Next()
	require.NoError(t, err)
	assert.Equal(t, Event{Kind: Del, UID: "uid-1"}, ev)
	require.NoError(t, c.Ack(""))
	s.ReadAck()
}

// An Add must carry exactly one netns: none or two is an error, and any descriptors that came are
// closed rather than leaked.
func TestAddNeedsOneDescriptor(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		s, c := connect(t)
		s.ReadHello()
		s.Send(zdstest.Add("uid-1", nil))
		_, err := c.Next()
		assert.ErrorContains(t, err, "0 descriptors")
	})
	t.Run("two", func(t *testing.T) {
		s, c := connect(t)
		s.ReadHello()
		r1, w1 := pipe(t)
		r2, w2 := pipe(t)
		s.Send(zdstest.Add("uid-1", nil), int(r1.Fd()), int(r2.Fd()))
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
	s.ReadHello()
	r, w := pipe(t)
	s.Send(zdstest.Del("uid-1"), int(r.Fd()))
	r.Close()
	ev, err := c.Next()
	require.NoError(t, err)
	assert.Equal(t, Event{Kind: Del, UID: "uid-1"}, ev)
	assert.True(t, allReadersClosed(t, w), "descriptor leaked")
}

// The server reads acks into 1024 bytes and rejects longer ones, so a long error is cut to fit.
func TestLongAckFitsServerBuffer(t *testing.T) {
	s, c := connect(t)
	s.ReadHello()
	s.Send(zdstest.Del("uid-1"))
	_, err := c.Next()
	require.NoError(t, err)
	long := strings.Repeat("é", 3000) // 6000 bytes, two per rune
	require.NoError(t, c.Ack(long))
	got := s.ReadAck().GetError()
	assert.NotEmpty(t, got)
	assert.True(t, strings.HasPrefix(long, got), "ack text is not a prefix of the error")
}

// Acks follow requests one for one: an ack with nothing to answer would make the server drop the
// connection, and reading on without acking would desynchronise it.
func TestAckLockStep(t *testing.T) {
	s, c := connect(t)
	s.ReadHello()
	assert.ErrorContains(t, c.Ack(""), "no request")
	assert.ErrorIs(t, s.CheckAlive(), os.ErrDeadlineExceeded, "an unsolicited ack reached the server")

	s.Send(zdstest.Del("uid-1"))
	_, err := c.Next()
	require.NoError(t, err)
	_, err = c.Next()
	assert.ErrorContains(t, err, "not acked")
	require.NoError(t, c.Ack(""))
	s.ReadAck()
	assert.ErrorContains(t, c.Ack(""), "no request")
}

// When istio-cni goes away Next returns an error, so the caller can redial.
func TestServerClose(t *testing.T) {
	s, c := connect(t)
	s.ReadHello()
	require.NoError(t, s.U.Close())
	_, err := c.Next()
	assert.ErrorIs(t, err, io.EOF)
}
