// Package identity gets a workload certificate the way ztunnel gets one: a fresh key and a CSR,
// signed by istiod's CA (IstioCertificateService/CreateCertificate on 15012) for the identity of
// the service-account token that authenticates the call. Nothing here holds a CA key: istiod
// reviews the token with the cluster's API server and signs for that token's service account.
package identity

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"
	"istio.io/istio/pkg/security"
	"istio.io/istio/security/pkg/pki/util"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// Audience is what istiod's CA accepts a token for (its TOKEN_AUDIENCES default).
const Audience = "istio-ca"

// Issuer reaches one istiod's CA. Set its fields and call Issue or IssueFor: the first call dials
// istiod and later calls share that connection until Close (a call after Close dials again). It is
// safe for concurrent use; do not copy it after the first call.
type Issuer struct {
	// CAAddress is istiod's secure port (15012) as this process reaches it; CAName is the name its
	// serving certificate carries (istiod.istio-system.svc; "" checks CAAddress's host instead).
	CAAddress, CAName string
	// ClusterID is the cluster whose API server reviews the token: istiod picks it by this header.
	ClusterID string
	// RootFile holds the root that istiod's serving certificate chains to (a pod's mounted
	// istio-ca-root-cert).
	RootFile string
	// Token returns a service-account token for Audience (a pod's projected token).
	Token func() (string, error)

	mu   sync.Mutex
	conn *grpc.ClientConn
}

// Certificate is a key and what istiod signed for it.
type Certificate struct {
	Key crypto.Signer
	// Chain is the leaf, then the intermediates; Root is the root, which istiod sends last.
	Chain []*x509.Certificate
	Root  *x509.Certificate
	// ID is the leaf's SPIFFE identity, as istiod chose it from the token.
	ID string
}

// Issue asks istiod for a certificate valid for ttl. The CSR names no identity: istiod signs for
// the token's service account.
func (i *Issuer) Issue(ttl time.Duration) (*Certificate, error) { return i.sign(ttl, "") }

// IssueFor asks for a certificate of another identity, as ztunnel asks for the pods on its node:
// istiod signs only for a caller among its CA_TRUSTED_NODE_ACCOUNTS whose token is bound to a pod
// on the node of a pod running as spiffeID.
func (i *Issuer) IssueFor(ttl time.Duration, spiffeID string) (*Certificate, error) {
	if spiffeID == "" {
		return nil, errors.New("identity: IssueFor needs an identity")
	}
	return i.sign(ttl, spiffeID)
}

// Close ends the connection to istiod.
func (i *Issuer) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.conn == nil {
		return nil
	}
	err := i.conn.Close()
	i.conn = nil
	return err
}

// sign sends one CreateCertificate with the metadata Istio's citadel client sends (the token as
// a bearer, the cluster ID), and the impersonated identity when there is one.
func (i *Issuer) sign(ttl time.Duration, impersonate string) (*Certificate, error) {
	if i.Token == nil {
		return nil, errors.New("identity: no token source")
	}
	conn, err := i.connect()
	if err != nil {
		return nil, err
	}
	token, err := i.Token()
	if err != nil {
		return nil, fmt.Errorf("identity: token: %w", err)
	}
	csr, keyPEM, err := util.GenCSR(util.CertOptions{ECSigAlg: util.EcdsaSigAlg})
	if err != nil {
		return nil, fmt.Errorf("identity: CSR: %w", err)
	}
	req := &pb.IstioCertificateRequest{Csr: string(csr), ValidityDuration: int64(ttl.Seconds())}
	if impersonate != "" {
		req.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{security.ImpersonatedIdentity: structpb.NewStringValue(impersonate)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// As Istio's citadel client: ClusterID always (istiod reviews the token with that cluster's API
	// server; "" means its own), and the token as a bearer unless there is none.
	ctx = metadata.AppendToOutgoingContext(ctx, "ClusterID", i.ClusterID)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	resp, err := pb.NewIstioCertificateServiceClient(conn).CreateCertificate(ctx, req)
	if err != nil {
		what := ""
		if impersonate != "" {
			what = " for " + impersonate
		}
		return nil, fmt.Errorf("identity: istiod CA %s (cluster %s)%s: %w", i.CAAddress, i.ClusterID, what, err)
	}
	return parse(resp.GetCertChain(), keyPEM)
}

// connect dials istiod once, verifying its serving certificate against RootFile.
func (i *Issuer) connect() (*grpc.ClientConn, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.conn != nil {
		return i.conn, nil
	}
	root, err := os.ReadFile(i.RootFile)
	if err != nil {
		return nil, fmt.Errorf("identity: istiod's root: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(root) {
		return nil, fmt.Errorf("identity: no certificate in %s", i.RootFile)
	}
	conn, err := grpc.NewClient(i.CAAddress, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: pool, ServerName: i.CAName, MinVersion: tls.VersionTLS12})))
	if err != nil {
		return nil, fmt.Errorf("identity: istiod CA %s: %w", i.CAAddress, err)
	}
	i.conn = conn
	return conn, nil
}

// parse reads istiod's answer: one certificate per element, the root last.
func parse(chain []string, keyPEM []byte) (*Certificate, error) {
	if len(chain) < 2 {
		return nil, fmt.Errorf("identity: istiod sent %d certificates, want a leaf and a root at least", len(chain))
	}
	var certs []*x509.Certificate
	for k, s := range chain {
		b, _ := pem.Decode([]byte(s))
		if b == nil {
			return nil, fmt.Errorf("identity: certificate %d of istiod's chain is not PEM", k)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("identity: certificate %d of istiod's chain: %w", k, err)
		}
		certs = append(certs, c)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("identity: the generated key is not PEM")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("identity: the generated key: %w", err)
	}
	ids, err := util.ExtractIDs(certs[0].Extensions)
	if err != nil || len(ids) != 1 {
		return nil, fmt.Errorf("identity: the leaf istiod signed names identities %v (%v), want one", ids, err)
	}
	return &Certificate{Key: key, Chain: certs[:len(certs)-1], Root: certs[len(certs)-1], ID: ids[0]}, nil
}

// Cert is the certificate in the form the HBONE code presents.
func (c *Certificate) Cert() (*pki.Cert, error) {
	var chain []byte
	var der [][]byte
	for _, x := range c.Chain {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x.Raw})...)
		der = append(der, x.Raw)
	}
	if len(der) == 0 {
		return nil, errors.New("identity: an empty certificate chain")
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		return nil, err
	}
	return &pki.Cert{
		ID:       c.ID,
		ChainPEM: chain,
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		RootPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Root.Raw}),
		TLS:      tls.Certificate{Certificate: der, PrivateKey: c.Key, Leaf: c.Chain[0]},
	}, nil
}
