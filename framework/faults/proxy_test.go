package faults

import (
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoServer answers every connection by echoing what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// echoProxy is a proxy with delay d to a new echo server, closed when t ends.
func echoProxy(t *testing.T, d Delay) *Proxy {
	t.Helper()
	p, err := Listen(echoServer(t), d)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// dial connects to p, closing the connection when t ends.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// assertClosed checks that c was closed (a read fails at once, not by timing out).
func assertClosed(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if assert.Error(t, err, msg) && errors.As(err, &ne) {
		assert.False(t, ne.Timeout(), "closed, not merely silent")
	}
}

// roundTrip writes msg through addr and reads it back, returning how long that took.
func roundTrip(t *testing.T, c net.Conn, msg string) time.Duration {
	t.Helper()
	start := time.Now()
	_, err := c.Write([]byte(msg))
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, msg, string(got), "bytes pass untouched")
	return time.Since(start)
}

func TestProxyDelaysSetupAndChunks(t *testing.T) {
	p := echoProxy(t, Delay{Setup: 300 * time.Millisecond, PerChunk: 200 * time.Millisecond})
	host, _, err := net.SplitHostPort(p.Addr())
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host, "the proxy stays on loopback, where the upstream's certificate IP matches")

	// Timed from before the dial: the setup delay starts when the proxy accepts, which can come
	// before the first write (seen: 497.96 ms from the write, on a host running four test packages).
	start := time.Now()
	assert.True(t, p.LastChunk().IsZero(), "nothing moved yet")
	c := dial(t, p)
	roundTrip(t, c, "hello")
	first := time.Since(start)
	assert.False(t, p.LastChunk().Before(start), "the delayed echo moved the transfer's clock")
	assert.GreaterOrEqual(t, first, 500*time.Millisecond, "setup plus one chunk")
	assert.Less(t, first, 2*time.Second)
	second := roundTrip(t, c, "again")
	assert.GreaterOrEqual(t, second, 200*time.Millisecond, "one chunk")
	assert.Less(t, second, 450*time.Millisecond, "no setup delay on a connection already up")
}

func TestProxyCountsTheBytesItDelivers(t *testing.T) {
	p := echoProxy(t, Delay{})
	assert.Zero(t, p.Delivered(), "nothing moved yet")
	c := dial(t, p)
	roundTrip(t, c, "hello")
	roundTrip(t, c, "again!")
	assert.EqualValues(t, len("hello")+len("again!"), p.Delivered(), "only what upstream sent to the client counts")
}

func TestProxyWithoutDelayIsPlainForwarding(t *testing.T) {
	c := dial(t, echoProxy(t, Delay{}))
	assert.Less(t, roundTrip(t, c, "quick"), 100*time.Millisecond)
}

func TestProxyCloseEndsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	p, err := Listen(echoServer(t), Delay{PerChunk: time.Hour})
	require.NoError(t, err)
	open := dial(t, p)
	_, err = open.Write([]byte("stuck")) // its echo waits an hour in the proxy
	require.NoError(t, err)
	waiting := dial(t, p)
	time.Sleep(100 * time.Millisecond)

	closed := make(chan struct{})
	go func() { _ = p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a chunk was being delayed")
	}
	for _, c := range []net.Conn{open, waiting} {
		assertClosed(t, c, "the proxied connection is closed")
	}
	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	assert.Error(t, err, "the listener is gone")
	// The echo server's own goroutines end when their peers (closed by the proxy) go.
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+1, "no proxy goroutine is left (the +1 is the echo server's accept loop)")
}

func TestProxyDownRefusesUntilItComesBack(t *testing.T) {
	p := echoProxy(t, Delay{})
	open := dial(t, p)
	roundTrip(t, open, "before")

	p.SetDown(true)
	assertClosed(t, open, "closed while down")
	during, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err, "the port still accepts, as a host whose server is gone resets")
	defer during.Close()
	assertClosed(t, during, "closed while down")

	p.SetDown(false)
	roundTrip(t, dial(t, p), "after")
}

func TestProxyStallHoldsBytesUntilReleased(t *testing.T) {
	p := echoProxy(t, Delay{})
	c := dial(t, p)
	roundTrip(t, c, "before")

	p.SetStalled(true)
	_, err := c.Write([]byte("held"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	_, err = c.Read(make([]byte, 4))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout(), "nothing comes back while stalled, and the connection stays open")
	assert.EqualValues(t, len("before"), p.Delivered(), "a stalled transfer stands still")

	p.SetStalled(false)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	got := make([]byte, 4)
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, "held", string(got), "released, the held bytes arrive")
}
