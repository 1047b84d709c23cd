package proc

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A table as the kernel writes it: a listener, a loopback connection, a connection to
// 10.11.0.5:8080 in SYN_SENT, one of another process, and an unconnected UDP socket.
const tcpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 101 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:9C41 05000B0A:1F90 02 00000000:00000000 00:00000000 00000000     0        0 102 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:9C42 0200000A:0050 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 20 4 30 10 -1
`

const udpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
   5: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 103 2 0000000000000000 0
`

func TestParseConnectionsKeepsOwnConnectedSockets(t *testing.T) {
	owner := map[string]int{"100": 7, "101": 7, "102": 8, "103": 7}
	got, err := parseConnections(strings.NewReader(tcpTable), "tcp", owner)
	require.NoError(t, err)
	require.Len(t, got, 2, "not the listener, not another process's socket: %v", got)
	assert.Equal(t, Conn{Pid: 7, Proto: "tcp", Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:8080"), State: "01"}, got[0])
	assert.Equal(t, netip.MustParseAddrPort("10.11.0.5:8080"), got[1].Remote, "a dial in progress counts")
	assert.Equal(t, 8, got[1].Pid)

	got, err = parseConnections(strings.NewReader(udpTable), "udp", owner)
	require.NoError(t, err)
	assert.Empty(t, got, "an unconnected UDP socket has no peer")
}

// The watch attributes a connection of this process, and only the connections it samples.
func TestWatchSeesThisProcess(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			time.Sleep(300 * time.Millisecond)
			c.Close()
		}
	}()
	w := WatchConnections(20 * time.Millisecond)
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	c.Close()
	r := w.Stop()
	require.NoError(t, r.Err)
	assert.Greater(t, r.Samples, 1)
	assert.Positive(t, r.Connections, "the loopback connection was seen")
	assert.Empty(t, r.OffLoopback)
	assert.Equal(t, "test process", r.Names[os.Getpid()])
}
