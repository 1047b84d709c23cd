// Package hbone is the wire layer of the emulated ambient data plane: HBONE
// (HTTP/2 CONNECT over SPIFFE mTLS on port 15008) and double HBONE (a second
// TLS + HTTP/2 CONNECT inside an outer CONNECT stream to the east-west
// gateway), sized and pooled like ztunnel.
package hbone

import (
	"io"
	"net"
	"net/http"
)

// Port is the HBONE port of ztunnel and the east-west gateway.
const Port = 15008

// ztunnel's HTTP/2 sizing (istio/ztunnel src/config.rs).
const (
	streamWindow   = 4 << 20
	connWindow     = 16 << 20
	maxFrameSize   = 1 << 20
	maxStreams     = 100
	maxReasonBytes = 1 << 10
)

// Header names ztunnel sets on CONNECT requests.
const (
	HeaderForwarded        = "Forwarded"
	HeaderBaggage          = "Baggage"
	HeaderForwardedNetwork = "X-Forwarded-Network"
)

// Pipe copies bytes both ways between a and b until both directions end. When
// one side reaches EOF the other is half-closed (CloseWrite) so the far end
// sees EOF while replies still flow; an error in either direction closes both.
// Both conns are closed on return; the first copy error is returned.
func Pipe(a, b net.Conn) error {
	errc := make(chan error, 1)
	go func() { errc <- halfCopy(b, a) }()
	first := halfCopy(a, b)
	if first != nil {
		// Unblock the other direction, which may wait on a read forever.
		_ = a.Close()
		_ = b.Close()
	}
	second := <-errc
	_ = a.Close()
	_ = b.Close()
	if first != nil {
		return first
	}
	return second
}

// halfCopy copies src to dst and, on EOF, half-closes dst.
func halfCopy(dst, src net.Conn) error {
	if _, err := io.Copy(dst, src); err != nil {
		return err
	}
	return closeWrite(dst)
}

// closeWrite half-closes c when it can, and closes it otherwise.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// Addr is the synthetic address of one end of a CONNECT stream: the
// :authority for the target, the outer connection's address for the source.
type Addr string

// Network reports "hbone".
func (Addr) Network() string { return "hbone" }

func (a Addr) String() string { return string(a) }

// h2Config is ztunnel's HTTP/2 sizing in net/http's terms, read by both the
// x/net client (through its http.Transport) and server.
func h2Config() *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams:          maxStreams,
		MaxReadFrameSize:              maxFrameSize,
		MaxReceiveBufferPerConnection: connWindow,
		MaxReceiveBufferPerStream:     streamWindow,
	}
}
