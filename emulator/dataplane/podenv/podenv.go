// Package podenv is what the emulated data plane reads in its pod, where Istio's charts put it:
// the environment ztunnel's DaemonSet and the gateway Deployment istiod renders set, the projected
// token istiod's CA accepts, and the mesh root the pod mounts. It turns them into an identity
// issuer and an xDS watcher, as ztunnel and pilot-agent do.
package podenv

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/emulator/dataplane/identity"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// Where Istio's charts mount the token and the root.
const (
	TokenFile = "/var/run/secrets/tokens/istio-token"
	RootFile  = "/var/run/secrets/istio/root-cert.pem"
	// caName is the name istiod's serving certificate carries.
	caName = "istiod.istio-system.svc"
)

// Env is the pod's view of itself and of istiod.
type Env struct {
	Cluster, Network     string
	Node, Pod, Namespace string
	IP                   string
	CAAddress            string
	XDSAddress           string
	// Dir is writable scratch space (the charts mount /tmp for ztunnel; the gateway's root
	// filesystem is writable).
	Dir string
}

// FromEnviron reads the variables ztunnel's chart (CA_ADDRESS, XDS_ADDRESS, NETWORK) or the
// gateway template (CA_ADDR, ISTIO_META_NETWORK) sets, naming every one that is missing.
func FromEnviron() (Env, error) {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := os.Getenv(k); v != "" {
				return v
			}
		}
		return ""
	}
	e := Env{
		Cluster:    first("ISTIO_META_CLUSTER_ID"),
		Network:    first("NETWORK", "ISTIO_META_NETWORK"),
		Node:       first("NODE_NAME", "ISTIO_META_NODE_NAME"),
		Pod:        first("POD_NAME"),
		Namespace:  first("POD_NAMESPACE"),
		IP:         first("INSTANCE_IP"),
		CAAddress:  first("CA_ADDRESS", "CA_ADDR"),
		XDSAddress: first("XDS_ADDRESS", "CA_ADDRESS", "CA_ADDR"),
		Dir:        first("TMPDIR"),
	}
	if e.Dir == "" {
		e.Dir = "/tmp"
	}
	var missing []string
	for _, kv := range [][2]string{{"ISTIO_META_CLUSTER_ID", e.Cluster}, {"NETWORK or ISTIO_META_NETWORK", e.Network}, {"POD_NAME", e.Pod},
		{"POD_NAMESPACE", e.Namespace}, {"INSTANCE_IP", e.IP}, {"CA_ADDRESS or CA_ADDR", e.CAAddress}} {
		if kv[1] == "" {
			missing = append(missing, kv[0])
		}
	}
	if len(missing) > 0 {
		return e, fmt.Errorf("podenv: the pod sets no %s (Istio's charts set them)", strings.Join(missing, ", "))
	}
	return e, nil
}

// Issuer reaches istiod's CA with the pod's projected token.
func (e Env) Issuer() *identity.Issuer {
	return &identity.Issuer{CAAddress: e.CAAddress, CAName: caName, ClusterID: e.Cluster, RootFile: RootFile,
		Token: func() (string, error) {
			b, err := os.ReadFile(TokenFile)
			return strings.TrimSpace(string(b)), err
		}}
}

// Roots is the mesh root the pod mounts.
func Roots() (*x509.CertPool, error) {
	b, err := os.ReadFile(RootFile)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("podenv: no certificate in %s", RootFile)
	}
	return p, nil
}

// Watch connects to istiod's workload xDS with cert (the pod's own identity) as the client
// certificate, as the in-process emulator's clients do, and waits for the initial state.
func (e Env) Watch(ctx context.Context, cert *pki.Cert, sync time.Duration) (*xdswatch.Watcher, error) {
	dir := filepath.Join(e.Dir, "xds")
	if err := cert.WriteDir(dir); err != nil {
		return nil, err
	}
	return xdswatch.Start(ctx, xdswatch.Config{Address: e.XDSAddress, CertDir: dir, IP: e.IP, Name: e.Pod, Node: e.Node, Cluster: e.Cluster}, sync)
}

// Cert turns what istiod signed into the form the HBONE code presents.
func Cert(c *identity.Certificate) (*pki.Cert, error) { return c.Cert() }
