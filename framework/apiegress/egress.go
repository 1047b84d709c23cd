// Package apiegress is where an API server's "cluster" egress goes when its pods' addresses are
// API data only (the local provider's clusters): an HTTP CONNECT proxy on a unix socket, in the
// test process, that maps a pod address to its loopback socket (emulator/dataplane/addrmap) and
// refuses everything else, failing closed.
package apiegress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ambientmc/ambientmc/emulator/dataplane/addrmap"
)

// Proxy is where an API server's "cluster" egress goes (its pod, service and node proxy
// subresources, kubectl logs and exec): an HTTP CONNECT proxy on a unix socket, in the test
// process, that dials through addrmap. Pod addresses are API data only, so a direct dial of one
// would leave the machine; through here it reaches the pod's loopback socket, and anything that
// is neither loopback nor a pod address of the plan is refused.
type Proxy struct {
	cluster string
	dir     string // a temporary directory to remove, if the socket is in one
	sock    string
	l       net.Listener
	log     io.Writer
	// Connected and Refused count CONNECTs carried and refused.
	Connected, Refused atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// maxSocketPath is the longest unix socket path Linux accepts (sun_path holds 108 bytes).
const maxSocketPath = 107

// Start listens on a unix socket in the cluster's directory, or in a private temporary
// directory when that path would be too long for a socket (deep test directories).
func Start(clusterDir, cluster string, log io.Writer) (*Proxy, error) {
	dir, sock := "", filepath.Join(clusterDir, "egress.sock")
	if len(sock) > maxSocketPath {
		var err error
		if dir, err = os.MkdirTemp("", "ambientmc-egress-"); err != nil {
			return nil, err
		}
		sock = filepath.Join(dir, cluster+".sock")
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	e := &Proxy{cluster: cluster, dir: dir, sock: sock, l: l, log: log, conns: map[net.Conn]struct{}{}}
	e.wg.Add(1)
	go e.serve()
	return e, nil
}

// egressConfig is the API server's --egress-selector-config-file: only the "cluster" egress is
// selected; etcd and the control plane (webhooks, aggregated APIs: none here) are dialled directly.
const egressConfig = `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`

// WriteConfig writes the egress selector configuration into dir and returns its path.
func (e *Proxy) WriteConfig(dir string) (string, error) {
	path := filepath.Join(dir, "egress-selector.yaml")
	return path, os.WriteFile(path, fmt.Appendf(nil, egressConfig, e.sock), 0o600)
}

func (e *Proxy) serve() {
	defer e.wg.Done()
	for {
		c, err := e.l.Accept()
		if err != nil {
			return
		}
		if !e.track(c, true) {
			c.Close()
			return
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer e.track(c, false)
			e.handle(c)
		}()
	}
}

func (e *Proxy) track(c net.Conn, add bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !add {
		delete(e.conns, c)
		return true
	}
	if e.conns == nil {
		return false // closed
	}
	e.conns[c] = struct{}{}
	return true
}

// handle serves one CONNECT: the API server opens a connection per proxied request.
func (e *Proxy) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		fmt.Fprintf(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	up, err := addrmap.Dial(req.Context(), "tcp", req.Host)
	if err != nil {
		e.Refused.Add(1)
		fmt.Fprintf(e.log, "ambientmc: %s: API server egress to %s refused: %v\n", e.cluster, req.Host, err)
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\n\r\n")
		return
	}
	defer up.Close()
	_ = c.SetReadDeadline(time.Time{})
	e.Connected.Add(1)
	if _, err := fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		// Bytes the API server sent after the CONNECT may already sit in br.
		_, _ = io.Copy(up, br)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
}

// Close stops listening, ends open tunnels and removes the socket.
func (e *Proxy) Close() {
	_ = e.l.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.conns = nil
	e.mu.Unlock()
	e.wg.Wait()
	_ = os.Remove(e.sock)
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// Socket is the unix socket the API server's egress selector dials.
func (e *Proxy) Socket() string { return e.sock }
