package dataplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ambientmc/ambientmc/emulator/dataplane/addrmap"
	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
)

// Gateway is an emulated east-west gateway: it terminates only the outer HBONE tunnel, picks a
// local endpoint of the service named by the CONNECT authority, and forwards the inner bytes
// (still encrypted end to end) to that endpoint's ztunnel on 15008, as Istio's Envoy gateway does.
type Gateway struct {
	cluster, network string
	view             atomic.Pointer[View]
	stop             func()
	closeSource      func()
	server           *hbone.Server
	dial             hbone.DialFunc
	// Forwarded counts tunnels relayed; Refused counts CONNECTs it could not route.
	Forwarded, Refused atomic.Int64

	mu   sync.Mutex
	rand *rand.Rand
}

// StartGateway serves HBONE on addr:15008 as the gateway's own identity (n.Certs: its service
// account's, from istiod's CA, renewed at half its lifetime); the gateway closes n.Certs when it
// stops.
func StartGateway(ctx context.Context, n Node, addr netip.Addr) (*Gateway, error) {
	w, err := n.watch(ctx, "eastwest-"+n.Cluster)
	if err != nil {
		_ = n.Certs.Close()
		return nil, fmt.Errorf("east-west gateway %s: %w", n.Cluster, err)
	}
	l, err := addrmap.Listen("tcp", netip.AddrPortFrom(addr, HBONEPort).String())
	if err != nil {
		w.Close()
		_ = n.Certs.Close()
		return nil, fmt.Errorf("east-west gateway %s: %w", n.Cluster, err)
	}
	g := ServeGateway(l, n.Certs.ServerConfig(n.Certs.ID(), n.Roots), w, n.Cluster, n.Network, addrmap.Dial)
	g.closeSource = func() {
		w.Close()
		_ = n.Certs.Close()
	}
	return g, nil
}

// ServeGateway runs the gateway on l: routing by what src (its cluster's istiod) says, reaching
// endpoints' ztunnels with dial.
func ServeGateway(l net.Listener, cfg *tls.Config, src AddressSource, cluster, network string, dial hbone.DialFunc) *Gateway {
	g := &Gateway{cluster: cluster, network: network, dial: dial, closeSource: func() {},
		rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))}
	g.stop = Follow(src, g.view.Store)
	g.server = hbone.Serve(l, cfg, g.route)
	return g
}

// route resolves host:port to a healthy endpoint of that service on the gateway's own network.
func (g *Gateway) route(ctx context.Context, r *http.Request, _ string) (net.Conn, int, error) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		g.Refused.Add(1)
		return nil, http.StatusBadRequest, fmt.Errorf("bad authority %q", r.Host)
	}
	v := g.view.Load()
	svc := v.ServiceByHostname(host)
	if svc == nil {
		g.Refused.Add(1)
		return nil, http.StatusServiceUnavailable, fmt.Errorf("no service %s in cluster %s", host, g.cluster)
	}
	var local []*Endpoint
	for _, ep := range v.Endpoints(svc) {
		if ep.Healthy && ep.Addr.IsValid() && ep.Network == g.network {
			local = append(local, ep)
		}
	}
	if len(local) == 0 {
		g.Refused.Add(1)
		return nil, http.StatusServiceUnavailable, fmt.Errorf("service %s has no healthy endpoint in cluster %s", host, g.cluster)
	}
	g.mu.Lock()
	ep := local[g.rand.IntN(len(local))]
	g.mu.Unlock()
	up, err := g.dial(ctx, "tcp", netip.AddrPortFrom(ep.Addr, HBONEPort).String())
	if err != nil {
		g.Refused.Add(1)
		return nil, http.StatusServiceUnavailable, fmt.Errorf("endpoint %s: %v", ep.Addr, err)
	}
	g.Forwarded.Add(1)
	return up, http.StatusOK, nil
}

// Close stops the gateway.
func (g *Gateway) Close() {
	g.server.Close()
	g.stop()
	g.closeSource()
}
