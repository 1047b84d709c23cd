package dataplane

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
	"github.com/ambientmc/ambientmc/framework/pki"
)

// Outbound is one captured connection of a source workload to a service port.
type Outbound struct {
	View    *View
	Source  *Endpoint
	Cert    *pki.Cert // the source's own identity, presented on every tunnel
	Roots   *x509.CertPool
	Cluster string // the source's cluster, sent in the baggage the destination reads
	Service *Service
	Port    uint32
}

// Dial opens the mesh connection as ztunnel does: one HBONE tunnel to an endpoint on the source's
// network, or double HBONE through the east-west gateway of the endpoint's network (the outer
// tunnel pooled and checking the gateway's identity, the inner one end to end checking the
// service's). It returns the upstream and the endpoint picked.
func (o Outbound) Dial(ctx context.Context, c *hbone.Client, r *rand.Rand) (net.Conn, *Endpoint, error) {
	svc, src := o.Service, o.Source
	ep, err := o.View.Pick(svc, src, o.Port, r)
	if err != nil {
		return nil, nil, err
	}
	headers := http.Header{}
	headers.Set("Forwarded", fmt.Sprintf("for=%q;host=%s", src.Addr.String(), svc.Hostname))
	headers.Set("Baggage", Baggage(o.Cluster, src))
	if ep.Addr.IsValid() && ep.Network == src.Network {
		up, err := c.Dial(ctx, hbone.Target{
			Addr:      netip.AddrPortFrom(ep.Addr, HBONEPort).String(),
			Authority: net.JoinHostPort(ep.Addr.String(), strconv.Itoa(int(svc.TargetPort(ep, o.Port)))),
			TLS:       pki.ClientConfig(o.Cert, o.Roots, append([]string{ep.Identity}, svc.SANs...)...),
			PoolKey:   src.Identity + "|" + ep.Identity + "|" + ep.Addr.String(),
			Headers:   headers,
		})
		return up, ep, err
	}
	gwID := GatewayIdentity
	if gw := o.View.Gateway(ep.Gateway); gw != nil {
		gwID = gw.Identity
	}
	gwPort := ep.GatewayPort
	if gwPort == 0 {
		gwPort = HBONEPort
	}
	authority := net.JoinHostPort(svc.Hostname, strconv.Itoa(int(o.Port)))
	inner := headers.Clone()
	inner.Set("X-Forwarded-Network", src.Network)
	up, err := c.DialDouble(ctx, hbone.Target{
		Addr:      netip.AddrPortFrom(ep.Gateway, uint16(gwPort)).String(),
		Authority: authority,
		TLS:       pki.ClientConfig(o.Cert, o.Roots, gwID),
		PoolKey:   src.Identity + "|" + gwID + "|" + ep.Gateway.String(),
		Headers:   headers,
	}, hbone.Target{
		Authority: authority,
		TLS:       pki.ClientConfig(o.Cert, o.Roots, svc.SANs...),
		Headers:   inner,
	})
	return up, ep, err
}

// Baggage is the W3C baggage ztunnel sends on a tunnel: the source's cluster, namespace and
// workload, which the destination's metrics label the connection with.
func Baggage(cluster string, src *Endpoint) string {
	b := "k8s.cluster.name=" + cluster
	if src.Namespace != "" {
		b += ",k8s.namespace.name=" + src.Namespace
	}
	if src.Workload != "" {
		b += ",k8s.deployment.name=" + src.Workload
	}
	return b
}

// ParseBaggage reads the members Baggage writes ("" for any absent).
func ParseBaggage(h string) (cluster, namespace, workload string) {
	for _, m := range strings.Split(h, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(m), "=")
		switch k {
		case "k8s.cluster.name":
			cluster = v
		case "k8s.namespace.name":
			namespace = v
		case "k8s.deployment.name":
			workload = v
		}
	}
	return cluster, namespace, workload
}
