package hbone

import (
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// An outer connection with no stream is let go after the pool's idle time, as ztunnel's pool lets
// go of one no one asked for (src/proxy/pool.rs maybe_checkin_conn): the next dial opens a new
// one. With the default idle time (5 minutes) it is reused.
func TestPoolReleasesIdleConnections(t *testing.T) {
	m := newMesh(t)
	dst := serve(t, m, m.echo, toEcho(startEcho(t)))
	target := Target{Addr: dst.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS()}
	stream := func(c *Client) {
		s, err := c.Dial(ctxT(t), target)
		require.NoError(t, err)
		roundTrip(t, s, []byte("hi"))
		require.NoError(t, s.Close())
	}

	short := NewClient(WithPoolIdleTimeout(100 * time.Millisecond))
	t.Cleanup(func() { _ = short.Close() })
	stream(short)
	time.Sleep(400 * time.Millisecond)
	stream(short)
	assert.Equal(t, int64(2), short.Stats().OuterConnsDialed, "an idle connection was kept past the pool's idle time")

	kept := newClient(t)
	stream(kept)
	time.Sleep(400 * time.Millisecond)
	stream(kept)
	assert.Equal(t, int64(1), kept.Stats().OuterConnsDialed, "a connection idle for less than 5 minutes was not reused")
}

// A new outer connection carries the CONNECT right after the HTTP/2 preface and settings, with no
// PING first (ztunnel: src/proxy/h2.rs sends its first PING 10 s after the handshake, off the
// request path): a cold connection costs no round trip more than ztunnel's.
func TestNoPingBeforeTheFirstConnect(t *testing.T) {
	m := newMesh(t)
	l := tls.NewListener(listen(t), pki.ServerConfig(m.echo, m.root.Pool()))
	firstFrames := make(chan []http2.FrameType, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, preface); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		var seen []http2.FrameType
		for len(seen) < 4 {
			f, err := fr.ReadFrame()
			if err != nil {
				break
			}
			seen = append(seen, f.Header().Type)
			if f.Header().Type == http2.FrameHeaders || f.Header().Type == http2.FramePing {
				break
			}
		}
		firstFrames <- seen
	}()
	c, ctx := newClient(t), ctxT(t)
	go func() {
		_, _ = c.Dial(ctx, Target{Addr: l.Addr().String(), Authority: "127.0.0.9:80", TLS: m.clientTLS(m.echo.ID)})
	}()
	select {
	case seen := <-firstFrames:
		require.NotEmpty(t, seen)
		assert.Equal(t, http2.FrameHeaders, seen[len(seen)-1], "frames before the CONNECT: %v", seen)
		assert.NotContains(t, seen, http2.FramePing)
	case <-time.After(testWait):
		t.Fatal("no frame reached the server")
	}
}
