package dataplane

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ambientmc/ambientmc/emulator/dataplane/addrmap"
	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
	"github.com/ambientmc/ambientmc/emulator/dataplane/nodecerts"
	"github.com/ambientmc/ambientmc/emulator/dataplane/rbac"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// HBONEPort is where ztunnels and gateways accept HBONE.
const HBONEPort = hbone.Port

// GatewayIdentity is the east-west gateway's SPIFFE ID (its service account is the Gateway's name).
var GatewayIdentity = pki.SPIFFEID(pki.IstioNamespace, "istio-eastwestgateway")

// Node describes where an emulated component runs and whom it talks to.
type Node struct {
	Cluster    string
	Network    string
	Name       string     // node name, as in pods' spec.nodeName
	IP         netip.Addr // node address (the ztunnel's own)
	XDSAddress string     // the cluster's istiod secure xDS address
	// Certs gets the component's certificates from its istiod's CA: its own, and a ztunnel's for
	// the pods of its node. The component started on the node owns it and closes it.
	Certs *nodecerts.Proxy
	Roots *x509.CertPool
	Dir   string // certificates for the xDS connection
	// Logf receives errors that happen after start (nil: dropped); the environment's log.
	Logf func(format string, args ...any)
}

// ownCertWait bounds how long a component waits for its own certificate at start.
const ownCertWait = 30 * time.Second

// watch connects a ztunnel-like xDS client for n, with the component's own certificate from
// istiod's CA as its client certificate.
func (n Node) watch(ctx context.Context, name string) (*xdswatch.Watcher, error) {
	cctx, cancel := context.WithTimeout(ctx, ownCertWait)
	cert, err := n.Certs.Own(cctx)
	cancel()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(n.Dir, name)
	if err := cert.WriteDir(dir); err != nil {
		return nil, err
	}
	return xdswatch.Start(ctx, xdswatch.Config{Address: n.XDSAddress, CertDir: dir, IP: n.IP.String(), Name: name, Node: n.Name, Cluster: n.Cluster}, time.Minute)
}

// ZtunnelStats count what a ztunnel carried, so tests can prove the path traffic took.
type ZtunnelStats struct {
	OutboundHBONE, OutboundDoubleHBONE, OutboundFailed atomic.Int64
	Inbound, InboundViaGateway, InboundRefused         atomic.Int64
}

// Ztunnel is an emulated ztunnel for one node.
type Ztunnel struct {
	node    Node
	watcher *xdswatch.Watcher
	view    atomic.Pointer[View]
	client  *hbone.Client
	source  netip.Addr // the captured pod whose outbound traffic this ztunnel carries
	Stats   ZtunnelStats
	lastErr atomic.Pointer[string] // why the latest failed outbound connection failed

	mu       sync.Mutex
	held     map[string]bool // identities of the pods this ztunnel serves, whose certificates it keeps
	outbound map[netip.AddrPort]net.Listener
	inbound  map[netip.Addr]*hbone.Server
	rand     *rand.Rand
	stop     func()
}

// StartZtunnel connects to istiod and keeps listeners in line with what it sends: outbound on the
// ClusterIP:port of every service with an address on this network (standing in for traffic
// capture), inbound HBONE on podIP:15008 of every pod on this node. source is the pod whose
// outbound connections the ztunnel attributes them to (its identity is used for mTLS). The
// certificates of those pods come from istiod's CA through n.Certs, asked for as each pod appears
// and renewed at half their lifetime; the ztunnel closes n.Certs when it stops.
func StartZtunnel(ctx context.Context, n Node, source netip.Addr) (*Ztunnel, error) {
	w, err := n.watch(ctx, "ztunnel-"+n.Name)
	if err != nil {
		_ = n.Certs.Close()
		return nil, fmt.Errorf("ztunnel %s/%s: %w", n.Cluster, n.Name, err)
	}
	z := &Ztunnel{node: n, watcher: w, client: hbone.NewClient(hbone.WithDialer(addrmap.Dial)), source: source, held: map[string]bool{},
		outbound: map[netip.AddrPort]net.Listener{}, inbound: map[netip.Addr]*hbone.Server{},
		rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
	var first error
	started := false
	z.stop = Follow(w, func(v *View) {
		err := z.reconcile(v)
		if !started {
			first, started = err, true
		} else if err != nil {
			if z.node.Logf != nil {
				z.node.Logf("ztunnel %s/%s: %v", z.node.Cluster, z.node.Name, err)
			}
		}
	})
	if first != nil {
		z.Close()
		return nil, first
	}
	return z, nil
}

// LastError says why the latest failed outbound connection failed ("" if none has).
func (z *Ztunnel) LastError() string {
	if p := z.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// View returns what the ztunnel currently knows.
func (z *Ztunnel) View() *View { return z.view.Load() }

// reconcile adopts a new view of istiod's state and opens or closes listeners to match.
func (z *Ztunnel) reconcile(v *View) error {
	z.view.Store(v)
	wantOut := map[netip.AddrPort]bool{}
	// Only a ztunnel that captures a pod's traffic listens on service addresses: several ztunnels
	// share loopback here, where real ones each capture their own pods.
	for _, s := range v.Services() {
		if !z.source.IsValid() {
			break
		}
		for _, vip := range s.VIPs[z.node.Network] {
			for port := range s.Ports {
				wantOut[netip.AddrPortFrom(vip, uint16(port))] = true
			}
		}
	}
	wantIn := inboundFor(v, z.node)
	z.mu.Lock()
	defer z.mu.Unlock()
	z.keepCertsLocked(v, wantIn)
	var errs []error
	for ap, l := range z.outbound {
		if !wantOut[ap] {
			l.Close()
			delete(z.outbound, ap)
		}
	}
	for ap := range wantOut {
		if _, ok := z.outbound[ap]; ok {
			continue
		}
		l, err := addrmap.Listen("tcp", ap.String())
		if err != nil {
			errs = append(errs, fmt.Errorf("outbound listener %s: %w", ap, err))
			continue
		}
		z.outbound[ap] = l
		go z.serveOutbound(l)
	}
	for addr, srv := range z.inbound {
		if wantIn[addr] == nil {
			srv.Close()
			delete(z.inbound, addr)
		}
	}
	for addr, ep := range wantIn {
		if _, ok := z.inbound[addr]; ok {
			continue
		}
		// Pod addresses are API data: the listener is on the pod address's loopback twin.
		l, err := addrmap.Listen("tcp", netip.AddrPortFrom(addr, HBONEPort).String())
		if err != nil {
			errs = append(errs, fmt.Errorf("inbound listener %s:%d: %w", addr, HBONEPort, err))
			continue
		}
		z.inbound[addr] = hbone.Serve(l, z.node.Certs.ServerConfig(ep.Identity, z.node.Roots), z.inboundHandler(addr))
	}
	return errors.Join(errs...)
}

// inboundFor is what node's ztunnel serves inbound: the pods on that node of its own cluster.
// Node names repeat across clusters, and istiod sends the pods of another cluster on the same
// network with their own addresses too, so the node name alone would take theirs.
func inboundFor(v *View, node Node) map[netip.Addr]*Endpoint {
	in := map[netip.Addr]*Endpoint{}
	for _, s := range v.Services() {
		for _, ep := range v.Endpoints(s) {
			if ep.Node == node.Name && ep.Cluster == node.Cluster && ep.Network == node.Network && ep.Addr.IsValid() {
				in[ep.Addr] = ep
			}
		}
	}
	return in
}

// keepCertsLocked keeps one certificate per identity of the pods the ztunnel serves (the pods of
// its node, and the pod whose traffic it captures), as ztunnel's CertFetcher does from what istiod
// sends: asked for when the identity's first workload on the node appears, forgotten when its
// last goes.
func (z *Ztunnel) keepCertsLocked(v *View, in map[netip.Addr]*Endpoint) {
	want := map[string]bool{}
	for _, ep := range in {
		want[ep.Identity] = true
	}
	if src := v.WorkloadByAddr(z.source); src != nil && z.source.IsValid() {
		want[src.Identity] = true
	}
	for id := range want {
		if !z.held[id] {
			z.node.Certs.Prefetch(id)
		}
	}
	for id := range z.held {
		if !want[id] {
			z.node.Certs.Forget(id)
		}
	}
	z.held = want
}

func (z *Ztunnel) serveOutbound(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			if err := z.proxyOutbound(conn); err != nil {
				z.Stats.OutboundFailed.Add(1)
				msg := err.Error()
				z.lastErr.Store(&msg)
			}
		}()
	}
}

// proxyOutbound carries one captured connection to the service it was addressed to.
func (z *Ztunnel) proxyOutbound(conn net.Conn) error {
	defer conn.Close()
	v := z.View()
	dst, err := netip.ParseAddrPort(conn.LocalAddr().String())
	if err != nil {
		return err
	}
	src := v.WorkloadByAddr(z.source)
	var svc *Service
	if src != nil {
		svc = v.ServiceByVIP(src.Network, dst.Addr(), src.Namespace)
	}
	if svc == nil || src == nil {
		return fmt.Errorf("no service at %s or no source workload %s", dst, z.source)
	}
	z.mu.Lock()
	r := z.rand.Uint64()
	z.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srcCert, err := z.node.Certs.Cert(ctx, src.Identity)
	if err != nil {
		return err
	}
	o := Outbound{View: v, Source: src, Cert: srcCert, Roots: z.node.Roots, Cluster: z.node.Cluster, Service: svc, Port: uint32(dst.Port())}
	upstream, ep, err := o.Dial(ctx, z.client, rand.New(rand.NewPCG(r, 2)))
	if err == nil {
		if ep.Addr.IsValid() && ep.Network == src.Network {
			z.Stats.OutboundHBONE.Add(1)
		} else {
			z.Stats.OutboundDoubleHBONE.Add(1)
		}
	}
	if err != nil {
		return err
	}
	hbone.Pipe(conn, upstream)
	return nil
}

// inboundHandler serves HBONE for the pod at addr: it accepts a tunnel from any identity under the
// mesh root that the pod's authorization policies allow, and forwards to the pod's application port.
func (z *Ztunnel) inboundHandler(addr netip.Addr) hbone.Handler {
	return func(ctx context.Context, r *http.Request, peerID string) (net.Conn, int, error) {
		host, portStr, err := net.SplitHostPort(r.Host)
		if err != nil {
			z.Stats.InboundRefused.Add(1)
			return nil, http.StatusBadRequest, fmt.Errorf("bad authority %q", r.Host)
		}
		port, _ := strconv.Atoi(portStr)
		target := netip.AddrPortFrom(addr, uint16(port))
		v := z.View() // one snapshot for the routing and the authorization of this tunnel
		if ip, err := netip.ParseAddr(host); err == nil {
			if ip != addr {
				z.Stats.InboundRefused.Add(1)
				return nil, http.StatusBadRequest, fmt.Errorf("authority %s is not this pod (%s)", host, addr)
			}
		} else {
			// A hostname authority arrives through an east-west gateway: resolve the service port.
			svc := v.ServiceByHostname(host)
			ep := v.WorkloadByAddr(addr)
			if svc == nil || ep == nil {
				z.Stats.InboundRefused.Add(1)
				return nil, http.StatusNotFound, fmt.Errorf("unknown service %s", host)
			}
			target = netip.AddrPortFrom(addr, uint16(svc.TargetPort(ep, uint32(port))))
			z.Stats.InboundViaGateway.Add(1)
		}
		if err := authorize(v, addr, r, target, peerID); err != nil {
			z.Stats.InboundRefused.Add(1)
			return nil, http.StatusUnauthorized, err
		}
		app, err := addrmap.Dial(ctx, "tcp", target.String())
		if err != nil {
			z.Stats.InboundRefused.Add(1)
			return nil, http.StatusServiceUnavailable, fmt.Errorf("application %s: %v", target, err)
		}
		z.Stats.Inbound.Add(1)
		return app, http.StatusOK, nil
	}
}

// Close stops listeners, the xDS stream and pooled connections.
func (z *Ztunnel) Close() {
	if z.stop != nil {
		z.stop()
	}
	z.mu.Lock()
	for _, l := range z.outbound {
		l.Close()
	}
	for _, s := range z.inbound {
		s.Close()
	}
	z.mu.Unlock()
	z.client.Close()
	z.watcher.Close()
	_ = z.node.Certs.Close()
}

// authorize is ztunnel's inbound authorization of the tunnel r to target, the pod at addr, from
// peerID (the verified identity of the tunnel's client; its source address is the tunnel's peer:
// the source pod, or the east-west gateway). A destination istiod has not sent is refused, as
// ztunnel refuses one it cannot find.
func authorize(v *View, addr netip.Addr, r *http.Request, target netip.AddrPort, peerID string) error {
	dst := v.WorkloadByAddr(addr)
	if dst == nil {
		return fmt.Errorf("rbac: destination workload %s not found", addr)
	}
	src, _ := netip.ParseAddrPort(r.RemoteAddr)
	return v.Authorize(dst, rbac.Conn{Src: src, Dst: target, SrcIdentity: peerID})
}
