// Package zds is the ztunnel side of istio-cni's "ZDS" protocol, so the emulated ztunnel can take
// over pods exactly like the real one: istio-cni's node agent captures each ambient pod's traffic
// and hands the pod's network namespace to the node's ztunnel over a unix SEQPACKET socket.
//
// The protocol (istio.io/istio cni/pkg/nodeagent/ztunnelserver*.go) is strictly lock-step:
//   - ztunnel connects and sends ZdsHello first (the server waits 5s for it);
//   - the server then sends one WorkloadRequest at a time (Add with the netns fd in SCM_RIGHTS,
//     or Keep, for each pod it knows, then SnapshotSent; afterwards Add and Del as pods come and go)
//     and waits 5s for exactly one WorkloadResponse ack before sending the next;
//   - ztunnel never sends anything else: every 5s of idle the server does a 10ms read, and any
//     message that arrives there is a protocol error that drops the connection. There is no
//     keepalive for the client to answer.
//
// The server reads every ztunnel message into a 1024-byte buffer and rejects truncated ones, so
// Ack shortens long error texts to fit.
package zds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"istio.io/istio/pkg/zdsapi"
)

// Kind of a request istio-cni sends.
type Kind int

const (
	// Add hands over a pod: its workload info and its network namespace.
	Add Kind = iota + 1
	// Keep, sent only during the initial snapshot, asks to keep a pod istio-cni has no netns
	// for any more (e.g. after its own restart) if ztunnel still has it.
	Keep
	// Del asks to stop serving a pod.
	Del
	// SnapshotSent ends the initial snapshot: pods not named since connecting are gone.
	SnapshotSent
)

func (k Kind) String() string {
	switch k {
	case Add:
		return "Add"
	case Keep:
		return "Keep"
	case Del:
		return "Del"
	case SnapshotSent:
		return "SnapshotSent"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is one request from istio-cni. Every Event must be answered with exactly one Ack.
type Event struct {
	Kind Kind
	// UID of the pod (Add, Keep, Del).
	UID string
	// Info names the pod (Add only).
	Info *zdsapi.WorkloadInfo
	// Netns is the pod's network namespace (Add only); the receiver owns it and must close it.
	Netns *os.File
}

const (
	// maxRequest bounds a request from istio-cni. The server does not bound what it sends; a real
	// request is a UID and three Kubernetes names (well under 1KiB), so 64KiB leaves ample room.
	maxRequest = 64 << 10
	// maxFDs is how many descriptors one read makes room for. The server attaches at most one;
	// room for a few more lets us close surplus ones instead of failing with a truncated control
	// message.
	maxFDs = 8
	// maxReply is the server's read buffer for hello and acks (readProto's [1024]byte); a longer
	// message fails there as "truncated message".
	maxReply = 1024
	// maxAckText keeps an ack, with its protobuf framing, within maxReply.
	maxAckText = maxReply - 16
)

// Conn is a connection to istio-cni's ZDS server. Next and Ack are meant to be called in turn
// from one goroutine.
type Conn struct {
	u       *net.UnixConn
	buf     []byte
	oob     []byte
	pending atomic.Bool // a request was returned by Next and not acked yet
}

// Dial connects to istio-cni's ZDS socket (by default /var/run/ztunnel/ztunnel.sock) and sends the
// hello, which the server requires before it sends anything.
func Dial(ctx context.Context, path string) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return nil, fmt.Errorf("zds: dial %s: %w", path, err)
	}
	c := &Conn{u: nc.(*net.UnixConn), buf: make([]byte, maxRequest), oob: make([]byte, unix.CmsgSpace(4*maxFDs))}
	hello, err := proto.Marshal(&zdsapi.ZdsHello{Version: zdsapi.Version_V1})
	if err == nil {
		_, err = c.u.Write(hello)
	}
	if err != nil {
		c.u.Close()
		return nil, fmt.Errorf("zds: hello: %w", err)
	}
	return c, nil
}

// Next blocks for the next request. The previous one must have been acked: the server waits only
// 5s for an ack, and a late one would be taken for the answer to a later request. After an error
// the connection is out of step with the server and should be closed.
func (c *Conn) Next() (Event, error) {
	if c.pending.Load() {
		return Event{}, errors.New("zds: previous request not acked")
	}
	n, oobn, flags, _, err := c.u.ReadMsgUnix(c.buf, c.oob)
	if err != nil {
		return Event{}, fmt.Errorf("zds: read: %w", err)
	}
	fds, ferr := parseFDs(c.oob[:oobn])
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	switch {
	case ferr != nil:
		closeAll()
		return Event{}, fmt.Errorf("zds: control message: %w", ferr)
	case flags&unix.MSG_TRUNC != 0:
		closeAll()
		return Event{}, fmt.Errorf("zds: request longer than %d bytes", len(c.buf))
	case flags&unix.MSG_CTRUNC != 0:
		closeAll()
		return Event{}, fmt.Errorf("zds: more than %d descriptors with a request", maxFDs)
	}
	var req zdsapi.WorkloadRequest
	if err := proto.Unmarshal(c.buf[:n], &req); err != nil {
		closeAll()
		return Event{}, fmt.Errorf("zds: decode request: %w", err)
	}
	var ev Event
	switch p := req.GetPayload().(type) {
	case *zdsapi.WorkloadRequest_Add:
		if len(fds) != 1 {
			closeAll()
			return Event{}, fmt.Errorf("zds: Add of %s came with %d descriptors, want 1", p.Add.GetUid(), len(fds))
		}
		ev = Event{Kind: Add, UID: p.Add.GetUid(), Info: p.Add.GetWorkloadInfo(),
			Netns: os.NewFile(uintptr(fds[0]), "netns:"+p.Add.GetUid())}
		fds = nil
	case *zdsapi.WorkloadRequest_Keep:
		ev = Event{Kind: Keep, UID: p.Keep.GetUid()}
	case *zdsapi.WorkloadRequest_Del:
		ev = Event{Kind: Del, UID: p.Del.GetUid()}
	case *zdsapi.WorkloadRequest_SnapshotSent:
		ev = Event{Kind: SnapshotSent}
	default:
		closeAll()
		return Event{}, fmt.Errorf("zds: unknown request %v", &req)
	}
	closeAll() // descriptors nobody asked for
	c.pending.Store(true)
	return ev, nil
}

// parseFDs returns every descriptor passed in SCM_RIGHTS (Go's ReadMsgUnix already made them
// close-on-exec).
func parseFDs(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// Ack answers the request Next returned; a non-empty errMsg reports failure (istio-cni logs it and,
// for a pod being added, fails the pod's setup). Long texts are cut to fit the server's buffer.
func (c *Conn) Ack(errMsg string) error {
	if !c.pending.Load() {
		// The server takes any unsolicited message as a protocol error and drops the connection.
		return errors.New("zds: no request to ack")
	}
	data, err := proto.Marshal(&zdsapi.WorkloadResponse{Payload: &zdsapi.WorkloadResponse_Ack{
		Ack: &zdsapi.Ack{Error: fitText(errMsg, maxAckText)}}})
	if err != nil {
		return fmt.Errorf("zds: encode ack: %w", err)
	}
	if _, err := c.u.Write(data); err != nil {
		return fmt.Errorf("zds: ack: %w", err)
	}
	c.pending.Store(false)
	return nil
}

// fitText makes s valid UTF-8 (protobuf strings must be) and at most max bytes, cut on a rune.
func fitText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// Close closes the connection; istio-cni then sends new pods to whichever ztunnel connected last.
func (c *Conn) Close() error {
	return c.u.Close()
}
