// Package inpod is the emulated ztunnel as a node's pod runs it in Istio's in-pod mode: istio-cni
// hands it each ambient pod's network namespace over ZDS, and it opens ztunnel's listeners inside
// that namespace (15001 outbound, 15006 inbound plaintext, 15008 HBONE, 15053 DNS), where
// istio-cni's own redirection rules send the pod's traffic. Routing, HBONE and double HBONE are
// the in-process emulator's (emulator/dataplane); identities come from istiod's CA, asked for
// each pod's service account as ztunnel asks (impersonation); every inbound tunnel is authorized
// as ztunnel's L4 policies decide (emulator/dataplane/rbac). No ztunnel code runs here.
package inpod

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"istio.io/istio/pkg/zdsapi"

	"github.com/ambientmc/ambientmc/emulator/dataplane"
	"github.com/ambientmc/ambientmc/emulator/dataplane/dnsproxy"
	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
	"github.com/ambientmc/ambientmc/emulator/dataplane/identity"
	"github.com/ambientmc/ambientmc/emulator/dataplane/netns"
	"github.com/ambientmc/ambientmc/emulator/dataplane/rbac"
	"github.com/ambientmc/ambientmc/emulator/dataplane/zds"
	"github.com/ambientmc/ambientmc/framework/pki"
)

// ztunnel's in-pod ports (istio-cni's ZtunnelOutboundPort, ZtunnelInboundPlaintextPort,
// ZtunnelInboundPort, DNSCapturePort).
const (
	OutboundPort  = 15001
	PlaintextPort = 15006
	DNSPort       = 15053
)

// Config is what the emulated ztunnel needs of its node and of istiod.
type Config struct {
	Cluster, Network string
	Roots            *x509.CertPool
	// Certs holds the certificates of the pods' identities, from istiod's CA: the ztunnel asks
	// for one when the first pod of that identity arrives and forgets it with the last, and each
	// is renewed at half its lifetime.
	Certs *identity.SecretManager
	// View is istiod's current workload state.
	View func() *dataplane.View
	// DNS is the resolver the pods' captured DNS goes on to (host:port), the node's cluster DNS.
	DNS string
	// Transparent connects to a pod's application from the address the connection came from,
	// as ztunnel does when it may set IP_TRANSPARENT (netns.CanBindTransparent); else from the
	// pod's own address.
	Transparent bool
	Metrics     *Metrics
	Logf        func(format string, args ...any)
}

// Ztunnel serves the pods istio-cni hands it.
type Ztunnel struct {
	cfg Config

	mu   sync.Mutex
	pods map[string]*pod   // by pod UID
	held *identity.Holders // pods served per identity
	rand *rand.Rand
}

// handshakeWait bounds how long an inbound handshake waits for the pod's certificate: a pod is
// served from its add on, before its certificate arrives (ztunnel acknowledges an add at once too).
const handshakeWait = 10 * time.Second

// New returns a ztunnel serving no pod yet.
func New(cfg Config) *Ztunnel {
	return &Ztunnel{cfg: cfg, pods: map[string]*pod{}, held: cfg.Certs.Holders(), rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))}
}

// Serve speaks ZDS with istio-cni's node agent at path until ctx ends, reconnecting as ztunnel
// does when the agent restarts. ready is told whether the ztunnel is ready, as ztunnel's readiness
// says it (src/inpod/statemanager.rs ready, workloadmanager.rs check_ready): not while a
// connection starts or after it ended, only once its snapshot is in and no Add of it failed.
func (z *Ztunnel) Serve(ctx context.Context, path string, ready func(bool)) error {
	for ctx.Err() == nil {
		err := z.session(ctx, path, ready)
		if ctx.Err() != nil {
			break
		}
		z.cfg.Logf("zds %s: %v; reconnecting", path, err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	for uid := range z.pods {
		z.dropLocked(uid)
	}
	return ctx.Err()
}

// session is one ZDS connection: the snapshot (Add or Keep for every pod the agent knows, then
// SnapshotSent, after which pods not named are gone), then changes. It follows ztunnel's
// src/inpod/statemanager.rs process_msg: a Keep only names a pod of the snapshot, whether this
// ztunnel serves it or not; a Keep or a second SnapshotSent after the snapshot is a protocol
// error, acked as one, which ends the connection (ztunnel exits; this one dials again).
func (z *Ztunnel) session(ctx context.Context, path string, ready func(bool)) error {
	ready(false)
	defer ready(false)
	c, err := zds.Dial(ctx, path)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	named := map[string]bool{}
	failedAdds := map[string]bool{} // ztunnel's pending workloads, which hold its readiness
	snapshot := true
	for {
		ev, err := c.Next()
		if err != nil {
			return err
		}
		var failed, protocol error
		switch ev.Kind {
		case zds.Add:
			named[ev.UID] = true
			if failed = z.add(ev.UID, ev.Info, ev.Netns); failed != nil {
				failedAdds[ev.UID] = true
			} else {
				delete(failedAdds, ev.UID)
			}
		case zds.Keep:
			if !snapshot {
				protocol = fmt.Errorf("pod keep received after snapshot (%s)", ev.UID)
				break
			}
			named[ev.UID] = true
		case zds.Del:
			delete(named, ev.UID)
			delete(failedAdds, ev.UID)
			z.remove(ev.UID)
		case zds.SnapshotSent:
			if !snapshot {
				protocol = errors.New("pod snapshot received already")
				break
			}
			z.mu.Lock()
			for uid := range z.pods {
				if !named[uid] {
					z.dropLocked(uid)
				}
			}
			z.mu.Unlock()
			for uid := range failedAdds {
				if !named[uid] {
					delete(failedAdds, uid)
				}
			}
			snapshot = false
		}
		if protocol != nil {
			failed = protocol
		}
		// Readiness before the ack: the agent's next step sees it.
		ready(protocol == nil && !snapshot && len(failedAdds) == 0)
		msg := ""
		if failed != nil {
			msg = failed.Error()
			z.cfg.Logf("zds: %v", failed)
		}
		if err := c.Ack(msg); err != nil {
			return err
		}
		if protocol != nil {
			return protocol
		}
	}
}

// Pods is how many pods the ztunnel serves.
func (z *Ztunnel) Pods() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return len(z.pods)
}

func (z *Ztunnel) remove(uid string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.dropLocked(uid)
}

// pod is one captured pod: its namespace, identity, listeners and tunnels.
type pod struct {
	z      *Ztunnel
	uid    string
	info   *zdsapi.WorkloadInfo
	nsFile *os.File
	ns     netns.NS
	nsID   netnsID
	id     string // the pod's SPIFFE identity
	client *hbone.Client
	closer []io.Closer

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // accepted on its listeners, not yet ended
	closed bool
}

// netnsID tells network namespaces apart as ztunnel does (src/inpod/netns.rs: the namespace
// file's device and inode).
type netnsID struct{ dev, ino uint64 }

func netnsIDOf(f *os.File) (netnsID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return netnsID{}, err
	}
	return netnsID{dev: st.Dev, ino: st.Ino}, nil
}

// add opens a pod's listeners in its namespace. An Add for a pod already served in the same
// namespace changes nothing (istio-cni sends one for every pod at each reconnect); in another
// namespace (its sandbox was made again) it replaces the pod, as ztunnel's add_workload does
// (src/inpod/statemanager.rs).
func (z *Ztunnel) add(uid string, info *zdsapi.WorkloadInfo, nsFile *os.File) error {
	if nsFile == nil || info == nil {
		if nsFile != nil {
			nsFile.Close()
		}
		return fmt.Errorf("pod %s: an add without its namespace or workload info", uid)
	}
	nsID, err := netnsIDOf(nsFile)
	if err != nil {
		nsFile.Close()
		return fmt.Errorf("pod %s: its namespace: %w", uid, err)
	}
	z.mu.Lock()
	if served := z.pods[uid]; served != nil && served.nsID == nsID {
		z.mu.Unlock()
		nsFile.Close()
		return nil
	}
	z.mu.Unlock()
	id := pki.SPIFFEID(info.GetNamespace(), info.GetServiceAccount())
	ns := netns.FromFile(nsFile)
	p := &pod{z: z, uid: uid, info: info, nsFile: nsFile, nsID: nsID, ns: ns, id: id, client: hbone.NewClient(hbone.WithDialer(hbone.DialFunc(ns.Dialer(true)))),
		conns: map[net.Conn]struct{}{}}
	err = p.listen()
	z.mu.Lock()
	defer z.mu.Unlock()
	if err != nil {
		p.close()
		return fmt.Errorf("pod %s/%s: %w", info.GetNamespace(), info.GetName(), err)
	}
	z.held.Add(id)    // before the replaced pod goes: an identity they share stays held
	z.dropLocked(uid) // an add for a pod served replaces it
	z.pods[uid] = p
	return nil
}

// dropLocked stops serving pod uid; its identity's certificate goes with the last pod of that
// identity, as ztunnel forgets it. The caller holds z.mu.
func (z *Ztunnel) dropLocked(uid string) {
	p := z.pods[uid]
	if p == nil {
		return
	}
	p.close()
	delete(z.pods, uid)
	z.held.Drop(p.id)
}

func (p *pod) listen() error {
	tcp := []struct {
		addr  string
		serve func(net.Listener)
	}{
		{"127.0.0.1:" + strconv.Itoa(OutboundPort), func(l net.Listener) { p.accept(l, p.outbound) }},
		{"0.0.0.0:" + strconv.Itoa(PlaintextPort), func(l net.Listener) { p.accept(l, p.plaintext) }},
		{"127.0.0.1:" + strconv.Itoa(DNSPort), func(l net.Listener) { p.accept(l, p.dnsTCP) }},
	}
	for _, t := range tcp {
		l, err := p.ns.Listen("tcp", t.addr)
		if err != nil {
			return err
		}
		p.closer = append(p.closer, l)
		go t.serve(l)
	}
	l, err := p.ns.Listen("tcp", "0.0.0.0:"+strconv.Itoa(dataplane.HBONEPort))
	if err != nil {
		return err
	}
	p.closer = append(p.closer, hbone.Serve(l, p.z.cfg.Certs.ServerConfig(p.id, p.z.cfg.Roots, handshakeWait), p.inbound))
	pc, err := p.ns.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(DNSPort))
	if err != nil {
		return err
	}
	p.closer = append(p.closer, pc)
	go p.dnsUDP(pc)
	return nil
}

// close stops serving the pod at once, every connection with it, as ztunnel does for a pod that
// is gone (src/inpod/statemanager.rs shutdown_workload: DrainMode::Immediate).
func (p *pod) close() {
	for _, c := range p.closer {
		c.Close()
	}
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.client.Close()
	p.nsFile.Close()
}

// accept hands every connection of l to handle until l closes, each tracked until it ends so
// that close ends it.
func (p *pod) accept(l net.Listener, handle func(net.Conn) error) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go func() {
			defer func() {
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
				c.Close()
			}()
			_ = handle(c)
		}()
	}
}

// self is this pod as istiod describes it (nil until istiod has sent it).
func (p *pod) self(v *dataplane.View) *dataplane.Endpoint {
	return v.Pod(p.z.cfg.Cluster, p.info.GetNamespace(), p.info.GetName())
}

// outbound carries one connection the pod opened, redirected here by istio-cni's rules: to a
// service istiod knows through the mesh, to anything else as it was addressed (passthrough).
func (p *pod) outbound(c net.Conn) error {
	dst, err := netns.OriginalDst(c)
	if err != nil {
		return p.fail("outbound: original destination: %v", err)
	}
	v := p.z.cfg.View()
	svc := v.ServiceByVIP(p.z.cfg.Network, dst.Addr(), p.info.GetNamespace())
	if svc == nil {
		up, err := p.ns.Dialer(true)(context.Background(), "tcp", dst.String())
		if err != nil {
			return p.fail("outbound passthrough to %s: %v", dst, err)
		}
		return hbone.Pipe(c, up)
	}
	src := p.self(v)
	if src == nil {
		return p.fail("outbound to %s: istiod has not sent this pod (%s/%s) yet", svc.Hostname, p.info.GetNamespace(), p.info.GetName())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.z.mu.Lock()
	r := rand.New(rand.NewPCG(p.z.rand.Uint64(), 2))
	p.z.mu.Unlock()
	cert, err := p.z.cfg.Certs.Fetch(ctx, p.id)
	if err != nil {
		return p.fail("outbound to %s: certificate: %v", svc.Hostname, err)
	}
	o := dataplane.Outbound{View: v, Source: src, Cert: cert, Roots: p.z.cfg.Roots, Cluster: p.z.cfg.Cluster, Service: svc, Port: uint32(dst.Port())}
	up, ep, err := o.Dial(ctx, p.client, r)
	if err != nil {
		return p.fail("outbound to %s: %v", svc.Hostname, err)
	}
	p.z.cfg.Metrics.Opened(Connection{Reporter: "source", SourceWorkload: src.Workload, SourceNamespace: src.Namespace, SourceCluster: p.z.cfg.Cluster,
		DestinationService: svc.Hostname, DestinationWorkload: ep.Workload, DestinationNamespace: ep.Namespace, DestinationCluster: ep.Cluster, MutualTLS: true})
	return hbone.Pipe(c, up)
}

// inbound serves one HBONE tunnel to this pod: addressed to the pod's IP and port by a ztunnel,
// or to a service hostname by an east-west gateway.
func (p *pod) inbound(ctx context.Context, r *http.Request, peerID string) (net.Conn, int, error) {
	v := p.z.cfg.View()
	self := p.self(v)
	if self == nil || !self.Addr.IsValid() {
		return nil, http.StatusServiceUnavailable, p.fail("inbound: istiod has not sent this pod (%s/%s) yet", p.info.GetNamespace(), p.info.GetName())
	}
	host, portStr, err := net.SplitHostPort(r.Host)
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("bad authority %q", r.Host)
	}
	port, _ := strconv.Atoi(portStr)
	target := netip.AddrPortFrom(self.Addr, uint16(port))
	service := ""
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip != self.Addr {
			return nil, http.StatusBadRequest, fmt.Errorf("authority %s is not this pod (%s)", host, self.Addr)
		}
	} else {
		svc := v.ServiceByHostname(host)
		if svc == nil {
			return nil, http.StatusNotFound, fmt.Errorf("unknown service %s", host)
		}
		target, service = netip.AddrPortFrom(self.Addr, uint16(svc.TargetPort(self, uint32(port)))), svc.Hostname
	}
	from, _ := netip.ParseAddrPort(r.RemoteAddr) // the tunnel's peer: the source pod, or the gateway
	// ztunnel's inbound authorization (emulator/dataplane/rbac): the verified client identity
	// against the policies that apply to this pod.
	if err := v.Authorize(self, rbac.Conn{Src: from, Dst: target, SrcIdentity: peerID}); err != nil {
		return nil, http.StatusUnauthorized, err
	}
	app, err := p.appDialer(from.Addr())(ctx, "tcp", target.String())
	if err != nil {
		return nil, http.StatusServiceUnavailable, fmt.Errorf("application %s: %v", target, err)
	}
	cluster, ns, workload := dataplane.ParseBaggage(r.Header.Get("Baggage"))
	p.z.cfg.Metrics.Opened(Connection{Reporter: "destination", SourceWorkload: workload, SourceNamespace: ns, SourceCluster: cluster,
		DestinationService: service, DestinationWorkload: self.Workload, DestinationNamespace: self.Namespace, DestinationCluster: p.z.cfg.Cluster, MutualTLS: true})
	return app, http.StatusOK, nil
}

// appDialer dials the pod's application: from the connection's source (from) when the ztunnel is
// transparent and knows it, else from the pod's own address.
func (p *pod) appDialer(from netip.Addr) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.z.cfg.Transparent && from.IsValid() {
		return p.ns.DialerFrom(from.Unmap())
	}
	return p.ns.Dialer(true)
}

// plaintext carries a connection from outside the mesh to the pod's application, as it was addressed.
func (p *pod) plaintext(c net.Conn) error {
	dst, err := netns.OriginalDst(c)
	if err != nil {
		return p.fail("inbound plaintext: original destination: %v", err)
	}
	var from netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		from = ta.AddrPort().Addr()
	}
	app, err := p.appDialer(from)(context.Background(), "tcp", dst.String())
	if err != nil {
		return p.fail("inbound plaintext to %s: %v", dst, err)
	}
	var wl, ns string
	if self := p.self(p.z.cfg.View()); self != nil {
		wl, ns = self.Workload, self.Namespace
	}
	p.z.cfg.Metrics.Opened(Connection{Reporter: "destination", DestinationWorkload: wl, DestinationNamespace: ns, DestinationCluster: p.z.cfg.Cluster})
	return hbone.Pipe(c, app)
}

// dnsUDP answers the pod's captured DNS queries for mesh services from the workload view, as
// ztunnel's DNS proxy does (dnsproxy), and forwards the rest to the cluster's resolver from the
// pod's namespace, the answers back.
func (p *pod) dnsUDP(pc net.PacketConn) {
	buf := make([]byte, 65535)
	client := dnsproxy.Client{Namespace: p.info.GetNamespace(), Network: p.z.cfg.Network, ClusterDomain: clusterDomain}
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		q := append([]byte(nil), buf[:n]...)
		if reply, ok := dnsproxy.Answer(q, p.z.cfg.View(), client); ok {
			_, _ = pc.WriteTo(reply, from)
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			up, err := p.ns.Dialer(true)(ctx, "udp", p.z.cfg.DNS)
			if err != nil {
				p.z.cfg.Logf("dns: %v", err)
				return
			}
			defer up.Close()
			_ = up.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := up.Write(q); err != nil {
				return
			}
			ans := make([]byte, 65535)
			m, err := up.Read(ans)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(ans[:m], from)
		}()
	}
}

// clusterDomain is the clusters' DNS domain, whose search domains a pod's resolver appends.
const clusterDomain = "cluster.local"

// dnsTCP forwards a captured DNS-over-TCP connection to the cluster's resolver: resolvers ask
// over UDP and fall back to TCP only for answers too long for it, which the view never gives.
func (p *pod) dnsTCP(c net.Conn) error {
	up, err := p.ns.Dialer(true)(context.Background(), "tcp", p.z.cfg.DNS)
	if err != nil {
		return p.fail("dns over tcp: %v", err)
	}
	return hbone.Pipe(c, up)
}

// fail logs a connection's failure (ztunnel's access log says the same) and returns it.
func (p *pod) fail(format string, args ...any) error {
	err := fmt.Errorf("pod %s/%s: "+format, append([]any{p.info.GetNamespace(), p.info.GetName()}, args...)...)
	p.z.cfg.Logf("%v", err)
	return err
}
