package addrmap

import (
	"context"
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSocket(t *testing.T) {
	for in, want := range map[string]string{
		"10.12.3.4":  "127.12.3.4", // a pod address: its twin
		"127.12.3.4": "127.12.3.4", // loopback: itself
		"127.0.0.1":  "127.0.0.1",
		"::1":        "::1",
	} {
		got, err := Socket(netip.MustParseAddr(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, got.String(), in)
	}
	for _, in := range []string{"10.244.0.1", "10.12.255.1", "192.0.2.1", "8.8.8.8", "0.0.0.0", "fd00::1"} {
		_, err := Socket(netip.MustParseAddr(in))
		assert.ErrorContains(t, err, "neither loopback nor a pod address", in)
	}
}

// A pod address is listened on and dialled at its loopback twin, so the two meet; anything else
// fails before a socket exists.
func TestListenAndDialMeetOnLoopback(t *testing.T) {
	l, err := Listen("tcp", "10.11.0.77:0")
	require.NoError(t, err)
	defer l.Close()
	ap := netip.MustParseAddrPort(l.Addr().String())
	assert.Equal(t, "127.11.0.77", ap.Addr().String())
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := Dial(context.Background(), "tcp", netip.AddrPortFrom(netip.MustParseAddr("10.11.0.77"), ap.Port()).String())
	require.NoError(t, err)
	got, _ := io.ReadAll(c)
	c.Close()
	assert.Equal(t, "hi", string(got))

	for _, addr := range []string{"192.0.2.1:80", "10.244.0.1:80", "example.com:80", "localhost:80"} {
		_, err := Dial(context.Background(), "tcp", addr)
		assert.Error(t, err, addr)
		_, err = Listen("tcp", addr)
		assert.Error(t, err, addr)
	}
	_, err = Dial(context.Background(), "udp", "127.0.0.1:53")
	assert.ErrorContains(t, err, "only TCP")
}
