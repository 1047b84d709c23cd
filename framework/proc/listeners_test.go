package proc

import (
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListeningFindsOwnSockets(t *testing.T) {
	l, err := net.Listen("tcp", "127.3.4.5:0")
	require.NoError(t, err)
	defer l.Close()
	want := netip.MustParseAddrPort(l.Addr().String())
	got, err := Listening(os.Getpid())
	require.NoError(t, err)
	assert.Contains(t, got, want)

	l.Close()
	got, err = Listening(os.Getpid())
	require.NoError(t, err)
	assert.NotContains(t, got, want, "a closed listener is gone")
}

func TestParseProcAddr(t *testing.T) {
	ap, err := parseProcAddr("0100007F:1F90")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddrPort("127.0.0.1:8080"), ap)
	ap, err = parseProcAddr("00000000000000000000000001000000:0050")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddrPort("[::1]:80"), ap)
	_, err = parseProcAddr("zz:1")
	assert.Error(t, err)
}
