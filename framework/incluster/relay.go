package incluster

import (
	"io"
	"net"
	"strconv"
	"sync"
)

// relay keeps an istiod handle's local ports for the handle's whole life and passes each
// connection to the current pod's port-forward. While no pod is reachable it closes connections
// at once, and when the pod goes it closes every connection it passed: clients see what a peer
// of a dead istiod sees (the connection ends) and reconnect. Without it a client that reconnects
// between the pod's death and the next pod's forward waits on client-go's forward to a pod that
// is no more: the forward holds the local connection until its SPDY stream times out (30 s),
// and gRPC waits its 20 s connect timeout, longer than a restart check's window.
type relay struct {
	mu    sync.Mutex
	ls    map[int]net.Listener // pod port -> local listener
	to    *forward             // nil: refuse
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newRelay listens on 127.0.0.1 for each pod port (ports the kernel picks) and refuses until pointed.
func newRelay(ports []int) (*relay, error) {
	r := &relay{ls: map[int]net.Listener{}, conns: map[net.Conn]struct{}{}}
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.Close()
			return nil, err
		}
		r.ls[p] = l
		r.wg.Add(1)
		go r.accept(p, l)
	}
	return r, nil
}

// addr is the local address for podPort, the same whichever pod serves it.
func (r *relay) addr(podPort int) string {
	return "127.0.0.1:" + strconv.Itoa(r.ls[podPort].Addr().(*net.TCPAddr).Port)
}

// point passes new connections to f (nil: refuses them) and ends those passed to the one before.
func (r *relay) point(f *forward) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.to == f {
		return
	}
	r.to = f
	r.cutLocked()
}

// drop refuses new connections and ends the current ones if f is still the one pointed to: its
// pod is gone.
func (r *relay) drop(f *forward) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.to == f {
		r.to = nil
		r.cutLocked()
	}
}

func (r *relay) cutLocked() {
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
}

// Close stops listening and ends every connection.
func (r *relay) Close() {
	r.mu.Lock()
	for _, l := range r.ls {
		l.Close()
	}
	r.to = nil
	r.cutLocked()
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *relay) accept(port int, l net.Listener) {
	defer r.wg.Done()
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		to := r.to
		if to == nil {
			r.mu.Unlock()
			in.Close()
			continue
		}
		r.conns[in] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(1)
		go r.pass(in, to.addr(port))
	}
}

// pass copies between in and the forward at addr until either side ends or the relay cuts in.
func (r *relay) pass(in net.Conn, addr string) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.conns, in)
		r.mu.Unlock()
		in.Close()
	}()
	out, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	// Tracked beside in, so a cut (which closes in) ends the copy from out as well.
	go func() {
		_, _ = io.Copy(out, in)
		out.Close()
	}()
	_, _ = io.Copy(in, out)
	out.Close()
}
