// Command emulated-dataplane is the project's emulated data plane as the programs Istio's charts
// run: built by make images into the ztunnel and proxyv2 images, it takes their arguments
// (`proxy ztunnel` from ztunnel's DaemonSet, `proxy waypoint ...` from the east-west gateway's
// Deployment that istiod renders with its waypoint template), their environment, token and
// mounted root. No ztunnel or
// Envoy code runs: routing, HBONE and double HBONE are emulator/dataplane's.
package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ambientmc/ambientmc/emulator/dataplane"
	"github.com/ambientmc/ambientmc/emulator/dataplane/identity"
	"github.com/ambientmc/ambientmc/emulator/dataplane/inpod"
	"github.com/ambientmc/ambientmc/emulator/dataplane/netns"
	"github.com/ambientmc/ambientmc/emulator/dataplane/podenv"
	"github.com/ambientmc/ambientmc/framework/pki"
)

// zdsSocket is where istio-cni's node agent serves ZDS (its --ztunnel-uds-address default, the
// hostPath ztunnel's chart mounts).
const zdsSocket = "/var/run/ztunnel/ztunnel.sock"

// certTTL is how long the certificates asked of istiod last (ztunnel's SECRET_TTL default); the
// ztunnel renews its pods' at half of it, as ztunnel does.
const certTTL = 24 * time.Hour

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch role(os.Args[1:]) {
	case "ztunnel":
		err = ztunnel(ctx)
	case "router", "waypoint":
		err = gateway(ctx)
	default:
		err = fmt.Errorf("arguments %q: want `proxy ztunnel` (ztunnel's chart), `proxy router ...` or `proxy waypoint ...` (istiod's gateway templates)", os.Args[1:])
	}
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// role is what Istio's charts ask of the image: the word after "proxy".
func role(args []string) string {
	if len(args) >= 2 && args[0] == "proxy" {
		return args[1]
	}
	return ""
}

// pod is what both roles start from: the pod's settings, its own identity from istiod's CA, the
// mounted root, and workload xDS.
type pod struct {
	env     podenv.Env
	issuer  *identity.Issuer
	cert    *pki.Cert
	roots   *x509.CertPool
	watched *dataplane.Watched
}

// start gets the pod's own identity from istiod's CA and connects to workload xDS with it.
func start(ctx context.Context, scratch string) (*pod, error) {
	env, err := podenv.FromEnviron()
	if err != nil {
		return nil, err
	}
	if env.Dir == "/tmp" && scratch != "" {
		env.Dir = scratch
	}
	roots, err := podenv.Roots()
	if err != nil {
		return nil, err
	}
	p := &pod{env: env, issuer: env.Issuer(), roots: roots}
	issued, err := p.issuer.Issue(certTTL)
	if err == nil {
		p.cert, err = podenv.Cert(issued)
	}
	if err != nil {
		p.issuer.Close()
		return nil, err
	}
	log.Printf("identity %s from istiod's CA at %s", p.cert.ID, env.CAAddress)
	w, err := env.Watch(ctx, p.cert, 2*time.Minute)
	if err != nil {
		p.issuer.Close()
		return nil, err
	}
	log.Printf("workload xDS from %s: %d resources", env.XDSAddress, len(w.Addresses()))
	p.watched = dataplane.Watch(w)
	return p, nil
}

func (p *pod) Close() {
	p.watched.Close()
	p.issuer.Close()
}

func ztunnel(ctx context.Context) error {
	p, err := start(ctx, "")
	if err != nil {
		return err
	}
	defer p.Close()
	env, watched := p.env, p.watched
	dns, err := resolver("/etc/resolv.conf")
	if err != nil {
		return err
	}
	certs := identity.NewSecretManager(func(id string) (*pki.Cert, error) {
		issued, err := p.issuer.IssueFor(certTTL, id)
		if err != nil {
			return nil, err
		}
		return podenv.Cert(issued)
	}, log.Printf)
	defer certs.Close()
	metrics := inpod.NewMetrics()
	// As ztunnel: applications see the original source where the process may bind it.
	transparent := netns.CanBindTransparent()
	log.Printf("inbound: transparent=%t (%v)", transparent == nil, transparent)
	z := inpod.New(inpod.Config{Cluster: env.Cluster, Network: env.Network, Roots: p.roots, View: watched.View, DNS: dns, Metrics: metrics, Logf: log.Printf,
		Transparent: transparent == nil, Certs: certs})
	var ready atomic.Bool
	stats := http.NewServeMux()
	stats.Handle("/metrics", metrics.Handler())
	serve(ctx, ":15020", stats)
	admin := http.NewServeMux()
	admin.HandleFunc("/config_dump", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(inpod.ConfigDump(watched.Addresses()))
	})
	// ztunnel's admin port binds localhost in the pod: only a port-forward reaches it.
	withProfiles(admin)
	serve(ctx, "127.0.0.1:15000", admin)
	serve(ctx, ":15021", readiness(&ready))
	log.Printf("ztunnel %s/%s on node %s: serving istio-cni's pods from %s", env.Cluster, env.Network, env.Node, zdsSocket)
	return z.Serve(ctx, zdsSocket, ready.Store)
}

func gateway(ctx context.Context) error {
	// The gateway's root filesystem is read-only; its template mounts istio-data.
	p, err := start(ctx, "/var/lib/istio/data")
	if err != nil {
		return err
	}
	defer p.Close()
	env, cert := p.env, p.cert
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", dataplane.HBONEPort))
	if err != nil {
		return err
	}
	var d net.Dialer
	g := dataplane.ServeGateway(l, pki.ServerConfig(cert, p.roots), p.watched.Source(), env.Cluster, env.Network, d.DialContext)
	defer g.Close()
	stats := http.NewServeMux()
	stats.HandleFunc("/stats/prometheus", func(w http.ResponseWriter, _ *http.Request) {
		writeGatewayStats(w, g.Forwarded.Load()+g.Refused.Load())
	})
	serve(ctx, ":15090", stats)
	var ready atomic.Bool
	ready.Store(true)
	serve(ctx, ":15021", readiness(&ready))
	// Envoy's admin port, localhost in the pod; here it serves only the profiles.
	admin := http.NewServeMux()
	withProfiles(admin)
	serve(ctx, "127.0.0.1:15000", admin)
	log.Printf("east-west gateway %s/%s: HBONE on %s as %s", env.Cluster, env.Network, l.Addr(), cert.ID)
	<-ctx.Done()
	return nil
}

// writeGatewayStats writes the east-west gateway's /stats/prometheus as a real gateway's Envoy
// does for the one stat the probes read: the downstream request counter of the HBONE listener's
// connection manager (stat prefix connect_terminate, no tag extracted by Istio's bootstrap), one
// per CONNECT, routed or refused; "name{} value" as Envoy writes a counter without tags
// (framework/realfmt cites the sources). A real gateway has it only when its pod asks Envoy for
// http.connect_terminate stats (sidecar.istio.io/statsInclusionPrefixes).
func writeGatewayStats(w io.Writer, tunnels int64) {
	const name = "envoy_http_connect_terminate_downstream_rq_total"
	fmt.Fprintf(w, "# TYPE %s counter\n%s{} %d\n", name, name, tunnels)
}

// withProfiles adds Go's profiles under /debug/pprof/ (ztunnel's admin serves its own there too),
// so that where the emulator's time goes in its pod can be read through a port-forward.
func withProfiles(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// readiness answers 200 once ready holds.
func readiness(ready *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready: istio-cni's snapshot not in on this connection, or a pod's add failed", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// serve runs an HTTP server on addr until ctx ends; failing to listen is fatal, as a port the
// charts name must be served.
func serve(ctx context.Context, addr string, h http.Handler) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatalf("listen %s: %v", addr, err)
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.Serve(l) }()
	context.AfterFunc(ctx, func() { _ = s.Close() })
}

// resolver is the first nameserver of a resolv.conf, as host:53.
func resolver(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "nameserver" {
			return net.JoinHostPort(fields[1], "53"), nil
		}
	}
	return "", fmt.Errorf("%s names no nameserver", path)
}
