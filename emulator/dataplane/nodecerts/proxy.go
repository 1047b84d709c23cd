// Package nodecerts is a node proxy's certificate client as the emulated data plane runs it in the
// test process: the pod a ztunnel runs as, an API object on its node that istiod's node
// authorizer reads; that pod's service-account token from the cluster's API server; istiod's CA
// (emulator/dataplane/identity); and the certificates the proxy holds for the pods on its node,
// renewed at half their lifetime. Nodes does the same for every ambient pod of nodes that carry
// no traffic here (the scale workloads' fake nodes), so that istiod signs for every pod as it
// would in a mesh with a ztunnel on each node.
package nodecerts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"istio.io/istio/security/pkg/pki/util"

	"github.com/ambientmc/ambientmc/emulator/dataplane/identity"
	"github.com/ambientmc/ambientmc/framework/pki"
)

const (
	// ZtunnelAccount is the service account ztunnel runs as in Istio's chart, which istiod's
	// CA_TRUSTED_NODE_ACCOUNTS names: it may ask for the identities of the pods on its node.
	ZtunnelAccount = "ztunnel"
	// CAName is the name istiod's serving certificate carries.
	CAName = "istiod.istio-system.svc"
	// DefaultTTL is what ztunnel asks istiod for (SECRET_TTL's default, 24 h).
	DefaultTTL = 24 * time.Hour
	// EmulatedLabel marks the pod objects the emulator runs as.
	EmulatedLabel = "ambientmc.io/emulated"
	// handshakeWait bounds how long an inbound handshake waits for its certificate.
	handshakeWait = 10 * time.Second
)

// Config is one node proxy's place in its cluster and its CA.
type Config struct {
	Client kubernetes.Interface
	// Cluster is the cluster's ID: istiod reviews the token with that cluster's API server.
	Cluster string
	// Node is where the proxy runs: its pod is bound there. "" binds its token to no pod (a
	// gateway, which asks for its own identity only).
	Node string
	// ServiceAccount in istio-system: ZtunnelAccount, or a gateway's own.
	ServiceAccount string
	// CAAddress is istiod's secure port (15012) as this process reaches it; RootFile holds the
	// mesh root its serving certificate chains to.
	CAAddress, RootFile string
	// TTL is asked of istiod for each certificate (0: DefaultTTL). istiod backdates NotBefore by
	// 2 minutes, so it must be longer than that for half the lifetime to lie ahead.
	TTL time.Duration
	// Logf receives failed requests (nil: dropped).
	Logf func(format string, args ...any)
}

// Proxy is one node proxy's certificates.
type Proxy struct {
	own    string
	issuer *identity.Issuer
	certs  *identity.SecretManager
}

// Start makes the proxy's service account and, on a node, its pod (both kept if they exist), and
// connects to istiod's CA with a token for them. Certificates are asked for on first use.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL <= util.ClockSkewGracePeriod {
		return nil, fmt.Errorf("certificate TTL %s: istiod backdates a certificate's NotBefore by %s, so half of a lifetime this short has passed on arrival and it would be renewed at once; ask for more than %s",
			cfg.TTL, util.ClockSkewGracePeriod, util.ClockSkewGracePeriod)
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	const ns = pki.IstioNamespace
	where := cfg.Cluster + "/" + cfg.ServiceAccount
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: cfg.ServiceAccount, Namespace: ns}}
	if _, err := cfg.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("node proxy %s: service account: %w", where, err)
	}
	var pod *corev1.Pod
	if cfg.Node != "" {
		var err error
		if pod, err = ensurePod(ctx, cfg); err != nil {
			return nil, fmt.Errorf("node proxy %s on %s: %w", where, cfg.Node, err)
		}
	}
	p := &Proxy{own: pki.SPIFFEID(ns, cfg.ServiceAccount), issuer: &identity.Issuer{
		CAAddress: cfg.CAAddress, CAName: CAName, ClusterID: cfg.Cluster, RootFile: cfg.RootFile,
		Token: identity.Token(cfg.Client, ns, cfg.ServiceAccount, pod)}}
	logf := func(format string, args ...any) {
		cfg.Logf("node proxy %s on %q: "+format, append([]any{where, cfg.Node}, args...)...)
	}
	p.certs = identity.NewSecretManager(func(id string) (*pki.Cert, error) {
		var c *identity.Certificate
		var err error
		if id == p.own {
			c, err = p.issuer.Issue(cfg.TTL)
		} else {
			c, err = p.issuer.IssueFor(cfg.TTL, id)
		}
		if err != nil {
			return nil, err
		}
		if c.ID != id {
			return nil, fmt.Errorf("istiod signed for %s, asked for %s", c.ID, id)
		}
		return c.Cert()
	}, logf)
	return p, nil
}

// ensurePod creates the pod the proxy runs as on its node, as its DaemonSet would (no kubelet
// runs it: istiod's node authorizer reads only its node and service account), or takes the one a
// proxy of the same node made before.
func ensurePod(ctx context.Context, cfg Config) (*corev1.Pod, error) {
	pods := cfg.Client.CoreV1().Pods(pki.IstioNamespace)
	name := cfg.ServiceAccount + "-" + cfg.Node
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{EmulatedLabel: cfg.ServiceAccount}},
		Spec: corev1.PodSpec{NodeName: cfg.Node, ServiceAccountName: cfg.ServiceAccount, AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "istio-proxy", Image: "emulated-" + cfg.ServiceAccount}}},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if pod, err = pods.Get(ctx, name, metav1.GetOptions{}); err == nil && (pod.Spec.NodeName != cfg.Node || pod.Spec.ServiceAccountName != cfg.ServiceAccount) {
			err = fmt.Errorf("pod %s/%s runs as %s on %q, not as this proxy: delete it", pki.IstioNamespace, name, pod.Spec.ServiceAccountName, pod.Spec.NodeName)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("its pod: %w", err)
	}
	return pod, nil
}

// ID is the proxy's own identity.
func (p *Proxy) ID() string { return p.own }

// Own returns the proxy's own certificate, waiting for the first at most until ctx ends.
func (p *Proxy) Own(ctx context.Context) (*pki.Cert, error) { return p.certs.Fetch(ctx, p.own) }

// Cert returns the certificate of a pod identity on the proxy's node, waiting as Own does.
func (p *Proxy) Cert(ctx context.Context, id string) (*pki.Cert, error) {
	return p.certs.Fetch(ctx, id)
}

// Prefetch starts keeping id's certificate, as ztunnel does for a workload that appears on its node.
func (p *Proxy) Prefetch(id string) { p.certs.Prefetch(id) }

// Forget stops keeping id's certificate, as ztunnel does when its node's last workload of id goes.
func (p *Proxy) Forget(id string) { p.certs.Forget(id) }

// ServerConfig is HBONE's server TLS for identity id: each handshake presents id's current
// certificate, waiting for the first.
func (p *Proxy) ServerConfig(id string, roots *x509.CertPool) *tls.Config {
	return p.certs.ServerConfig(id, roots, handshakeWait)
}

// Stats says what the proxy asked istiod for; Held how many identities have a certificate now.
func (p *Proxy) Stats() identity.Stats { return p.certs.Stats() }

// Held is how many identities have a certificate now.
func (p *Proxy) Held() int { return p.certs.Held() }

// Close stops renewing and ends the connection to istiod. The pod stays: a proxy started again
// on the node takes it, and the cluster's teardown removes it.
func (p *Proxy) Close() error {
	p.certs.Close()
	return p.issuer.Close()
}

// errClosed is what a closed set of proxies answers.
var errClosed = errors.New("nodecerts: closed")
