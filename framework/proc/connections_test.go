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

func TestParseTableKeepsConnectedSockets(t *testing.T) {
	got, err := parseTable(strings.NewReader(tcpTable), "tcp")
	require.NoError(t, err)
	require.Len(t, got, 3, "not the listener: %v", got)
	assert.Equal(t, tableEntry{Conn{Proto: "tcp", Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:8080"), State: "01"}, "101"}, got[0])

	udp, err := parseTable(strings.NewReader(udpTable), "udp")
	require.NoError(t, err)
	assert.Empty(t, udp, "an unconnected UDP socket has no peer")
}

// Only what leaves loopback and a watched process holds is kept, attributed to its holder.
func TestOffLoopbackOfKeepsOwnNonLoopbackSockets(t *testing.T) {
	entries, err := parseTable(strings.NewReader(tcpTable), "tcp")
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	// This process holds a socket; give entry 2 (a dial to 10.11.0.5:8080 in progress) its inode.
	owner := socketOwners([]int{os.Getpid()})
	require.NotEmpty(t, owner)
	for inode := range owner {
		entries[1].inode = inode
		break
	}
	got := offLoopbackOf(entries, []int{os.Getpid()})
	require.Len(t, got, 1, "not the loopback one, not the unowned 10.0.0.2:80: %v", got)
	assert.Equal(t, netip.MustParseAddrPort("10.11.0.5:8080"), got[0].Remote, "a dial in progress counts")
	assert.Equal(t, os.Getpid(), got[0].Pid)
	assert.Empty(t, offLoopbackOf(entries[:1], []int{os.Getpid()}), "loopback only: nothing to attribute")
}

// The watch samples this process and finds nothing in its loopback connection.
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
	assert.Empty(t, r.OffLoopback, "a loopback connection")
	assert.Equal(t, "test process", r.Names[os.Getpid()])
}
