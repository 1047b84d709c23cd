// Package faults injects faults between istiod and the API servers it reads, so that tests can
// hold istiod inside a window (a remote cluster still syncing) that is otherwise ~0.1 s wide.
package faults

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Delay says how slow a Proxy makes each connection.
type Delay struct {
	// Setup is waited before a new connection is dialled upstream (the client's TLS handshake
	// waits with it; keep it below client-go's 10 s TLS handshake timeout).
	Setup time.Duration
	// PerChunk is waited before each chunk read from upstream is written to the client, so a
	// LIST or WATCH response arrives slowly. Chunks are at most ChunkSize bytes.
	PerChunk time.Duration
	// ChunkSize bounds a chunk; 0 means 16 KiB.
	ChunkSize int
}

// Proxy is a loopback TCP proxy to one upstream address that adds Delay. It forwards bytes
// untouched (TLS passes through), so a client verifying the upstream's certificate by IP still
// matches when both listen on 127.0.0.1.
type Proxy struct {
	upstream string
	delay    Delay
	ln       net.Listener
	stop     chan struct{}
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	down  bool
	// release is closed when a stall ends (SetStalled); nil while bytes flow.
	release chan struct{}
	once    sync.Once
	// lastChunk is when the last delayed chunk reached a client (unix nanoseconds, 0: none yet).
	lastChunk atomic.Int64
	// delivered counts the bytes written to clients from upstream.
	delivered atomic.Int64
}

// Delivered is how many bytes the proxy has passed from upstream to its clients: how far a slowed
// transfer has got, whatever the host's speed.
func (p *Proxy) Delivered() int64 { return p.delivered.Load() }

// LastChunk is when the last delayed chunk reached a client (zero: none yet): a slowed transfer
// has ended once it stops moving.
func (p *Proxy) LastChunk() time.Time {
	if n := p.lastChunk.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// SetDelay changes the delay of connections made from now on.
func (p *Proxy) SetDelay(d Delay) {
	if d.ChunkSize <= 0 {
		d.ChunkSize = 16 << 10
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// delayNow is the delay for a new connection.
func (p *Proxy) delayNow() Delay {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// SetDown takes the upstream away (true) or brings it back (false): while down, every proxied
// connection is closed and new ones are closed as soon as they are accepted, as when the API
// server behind the proxy is gone.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

// SetStalled holds every byte from upstream (true) until released (false), keeping the
// connections open: a transfer that stops mid-way and never ends, as over a blackholed link.
func (p *Proxy) SetStalled(stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case stalled && p.release == nil:
		p.release = make(chan struct{})
	case !stalled && p.release != nil:
		close(p.release)
		p.release = nil
	}
}

// flowing waits while the proxy is stalled; it says whether to go on (false: the proxy closed).
func (p *Proxy) flowing() bool {
	p.mu.Lock()
	release := p.release
	p.mu.Unlock()
	if release == nil {
		return true
	}
	select {
	case <-release:
		return true
	case <-p.stop:
		return false
	}
}

// Listen starts a proxy on 127.0.0.1:0 that forwards to upstream (host:port).
func Listen(upstream string, d Delay) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults: listening for a proxy to %s: %w", upstream, err)
	}
	if d.ChunkSize <= 0 {
		d.ChunkSize = 16 << 10
	}
	p := &Proxy{upstream: upstream, delay: d, ln: ln, stop: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address, 127.0.0.1:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every proxied connection and waits for all of the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	var err error
	p.once.Do(func() {
		close(p.stop)
		err = p.ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
	})
	p.wg.Wait()
	return err
}

// track remembers c so Close can end it; it refuses (and closes c) once the proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stop:
		_ = c.Close()
		return false
	default:
	}
	if p.down {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			select {
			case <-p.stop:
				return
			default:
				continue // down: refused
			}
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// sleep waits d, or less if the proxy closes; it says whether to go on.
func (p *Proxy) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.stop:
		return false
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	d := p.delayNow()
	if !p.sleep(d.Setup) {
		return
	}
	up, err := net.DialTimeout("tcp", p.upstream, 10*time.Second)
	if err != nil {
		return // the client sees a closed connection, as with an unreachable server
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { // client to upstream: undelayed
		_, _ = io.Copy(up, client)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() { // upstream to client: each chunk late
		p.copyDelayed(client, up, d)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func (p *Proxy) copyDelayed(dst, src net.Conn, d Delay) {
	buf := make([]byte, d.ChunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.sleep(d.PerChunk) || !p.flowing() {
				return
			}
			p.lastChunk.Store(time.Now().UnixNano()) // before the write: a reader may act on it at once
			w, werr := dst.Write(buf[:n])
			p.delivered.Add(int64(w))
			if werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			return
		}
	}
}

// closeWrite half-closes c so the peer sees EOF while the other direction drains.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}
