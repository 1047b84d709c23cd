// Package identity gets a workload certificate the way ztunnel gets one: a fresh key and a CSR,
// signed by istiod's CA (IstioCertificateService/CreateCertificate on 15012) for the identity of
// the service-account token that authenticates the call. Nothing here holds a CA key: istiod
// reviews the token with the cluster's API server and signs for that token's service account.
package identity

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"istio.io/istio/pkg/security"
	"istio.io/istio/security/pkg/nodeagent/caclient/providers/citadel"
	"istio.io/istio/security/pkg/pki/util"
)

// Audience is what istiod's CA accepts a token for (its TOKEN_AUDIENCES default).
const Audience = "istio-ca"

// Issuer reaches one istiod's CA.
type Issuer struct {
	// CAAddress is istiod's secure port (15012) as this process reaches it; CAName is the name its
	// serving certificate carries (istiod.istio-system.svc).
	CAAddress, CAName string
	// ClusterID is the cluster whose API server reviews the token: istiod picks it by this header.
	ClusterID string
	// RootFile holds the root that istiod's serving certificate chains to (a pod's mounted
	// istio-ca-root-cert).
	RootFile string
	// Token returns a service-account token for Audience (a pod's projected token).
	Token func() (string, error)
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
func (i Issuer) Issue(ttl time.Duration) (*Certificate, error) {
	if i.Token == nil {
		return nil, errors.New("identity: no token source")
	}
	client, err := citadel.NewCitadelClient(&security.Options{
		CAEndpoint: i.CAAddress, CAEndpointSAN: i.CAName, ClusterID: i.ClusterID, CredFetcher: tokenFetcher(i.Token),
	}, &citadel.TLSOptions{RootCert: i.RootFile})
	if err != nil {
		return nil, fmt.Errorf("identity: istiod CA %s: %w", i.CAAddress, err)
	}
	defer client.Close()
	csr, keyPEM, err := util.GenCSR(util.CertOptions{ECSigAlg: util.EcdsaSigAlg})
	if err != nil {
		return nil, fmt.Errorf("identity: CSR: %w", err)
	}
	chain, err := client.CSRSign(csr, int64(ttl.Seconds()))
	if err != nil {
		return nil, fmt.Errorf("identity: istiod CA %s (cluster %s): %w", i.CAAddress, i.ClusterID, err)
	}
	return parse(chain, keyPEM)
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

// tokenFetcher gives the citadel client a token per call.
type tokenFetcher func() (string, error)

func (f tokenFetcher) GetPlatformCredential() (string, error) { return f() }
func (f tokenFetcher) GetIdentityProvider() string            { return "" }
func (f tokenFetcher) Stop()                                  {}
