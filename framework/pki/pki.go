// Package pki issues the mesh's certificates: one root CA per run, one
// intermediate CA per cluster (istiod's plugged-in "cacerts"), SPIFFE workload
// certificates, and mTLS configurations that verify peers by SPIFFE identity
// the way ztunnel does.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"istio.io/istio/security/pkg/pki/util"
)

// TrustDomain is the mesh's SPIFFE trust domain.
const TrustDomain = "cluster.local"

// File and Secret key names istiod reads (istio.io/istio/security/pkg/pki/ca).
const (
	CACertFile     = "ca-cert.pem"
	CAKeyFile      = "ca-key.pem"
	CertChainFile  = "cert-chain.pem"
	RootCertFile   = "root-cert.pem"
	KeyFile        = "key.pem"
	CACertsSecret  = "cacerts"
	IstioNamespace = "istio-system"
)

const (
	org = "ambientmc"
	// Lifetimes follow istio's tools/certs Makefile (ROOTCA_DAYS, INTERMEDIATE_DAYS).
	rootTTL         = 10 * 365 * 24 * time.Hour
	intermediateTTL = 2 * 365 * 24 * time.Hour
	// DefaultWorkloadTTL is istiod's default workload certificate lifetime.
	DefaultWorkloadTTL = 24 * time.Hour
	// clockSkew backdates CA certificates like istiod backdates leaves, so a
	// freshly started process with a slightly different clock accepts them.
	clockSkew = 2 * time.Minute
	// istiodDNS is the SAN the Makefile puts on each cluster's intermediate.
	istiodDNS = "istiod.istio-system.svc"
)

// SPIFFEID returns the workload identity of service account sa in namespace ns.
func SPIFFEID(ns, sa string) string {
	return "spiffe://" + TrustDomain + "/ns/" + ns + "/sa/" + sa
}

// Root is the run's self-signed root CA.
type Root struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
	key             crypto.Signer
}

// NewRoot creates an EC P-256 self-signed root CA valid for ten years.
func NewRoot() (*Root, error) {
	certPEM, keyPEM, err := util.GenCertKeyFromOptions(util.CertOptions{
		Org:          org,
		NotBefore:    time.Now().Add(-clockSkew),
		TTL:          rootTTL,
		IsCA:         true,
		IsSelfSigned: true,
		ECSigAlg:     util.EcdsaSigAlg,
		ECCCurve:     util.P256Curve,
	})
	if err != nil {
		return nil, fmt.Errorf("pki: generate root CA: %w", err)
	}
	cert, key, err := parsePair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: root CA: %w", err)
	}
	return &Root{CertPEM: certPEM, KeyPEM: keyPEM, Cert: cert, key: key}, nil
}

// Pool returns a pool holding only the root certificate.
func (r *Root) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(r.Cert)
	return p
}

// Intermediate is one cluster's signing CA, the istiod plugged-in CA bundle.
type Intermediate struct {
	Cluster string
	CertPEM []byte
	KeyPEM  []byte
	// ChainPEM is the intermediate followed by the root (cert-chain.pem).
	ChainPEM []byte
	RootPEM  []byte
	Cert     *x509.Certificate
	key      crypto.Signer
}

// NewIntermediate creates cluster's EC P-256 intermediate CA signed by r.
func (r *Root) NewIntermediate(cluster string) (*Intermediate, error) {
	if cluster == "" {
		return nil, errors.New("pki: intermediate CA needs a cluster name")
	}
	// Hand-written template: util.CertOptions cannot set Locality, and the
	// Makefile's intermediates carry L=<cluster> and pathlen:0.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: intermediate %s key: %w", cluster, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("pki: intermediate %s serial: %w", cluster, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{org},
			Locality:     []string{cluster},
			CommonName:   "Intermediate CA",
		},
		DNSNames:              []string{istiodDNS},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(intermediateTTL),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, r.Cert, &key.PublicKey, r.key)
	if err != nil {
		return nil, fmt.Errorf("pki: sign intermediate %s: %w", cluster, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse intermediate %s: %w", cluster, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encode intermediate %s key: %w", cluster, err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return &Intermediate{
		Cluster:  cluster,
		CertPEM:  certPEM,
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		ChainPEM: concat(certPEM, r.CertPEM),
		RootPEM:  clone(r.CertPEM),
		Cert:     cert,
		key:      key,
	}, nil
}

// LoadIntermediate is cluster's intermediate from its PEM files, as Istio's cacerts holds them
// (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem).
func LoadIntermediate(cluster string, certPEM, keyPEM, chainPEM, rootPEM []byte) (*Intermediate, error) {
	cert, key, err := parsePair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: intermediate %s: %w", cluster, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("pki: intermediate %s: the certificate is not a CA", cluster)
	}
	return &Intermediate{Cluster: cluster, CertPEM: clone(certPEM), KeyPEM: clone(keyPEM), ChainPEM: clone(chainPEM),
		RootPEM: clone(rootPEM), Cert: cert, key: key}, nil
}

// WriteCACerts writes istiod's plugged-in CA files into dir (created 0700):
// ca-cert.pem, ca-key.pem (0600), cert-chain.pem and root-cert.pem.
func (i *Intermediate) WriteCACerts(dir string) error {
	return writeFiles(dir, []file{
		{CACertFile, i.CertPEM, 0o644},
		{CAKeyFile, i.KeyPEM, 0o600},
		{CertChainFile, i.ChainPEM, 0o644},
		{RootCertFile, i.RootPEM, 0o644},
	})
}

// CACertsSecret returns the istio-system/cacerts Secret holding the same four files.
func (i *Intermediate) CACertsSecret() *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: CACertsSecret, Namespace: IstioNamespace},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			CACertFile:    clone(i.CertPEM),
			CAKeyFile:     clone(i.KeyPEM),
			CertChainFile: clone(i.ChainPEM),
			RootCertFile:  clone(i.RootPEM),
		},
	}
}

// Cert is a workload certificate with its key.
type Cert struct {
	// ID is the SPIFFE identity in the certificate's URI SAN.
	ID string
	// ChainPEM is the leaf followed by the intermediate (what ztunnel presents).
	ChainPEM []byte
	KeyPEM   []byte
	RootPEM  []byte
	// TLS carries the same chain and key, with Leaf parsed.
	TLS tls.Certificate
}

// Issue signs an EC P-256 workload certificate for ns/sa, valid for server and
// client auth; ttl <= 0 means DefaultWorkloadTTL.
func (i *Intermediate) Issue(ns, sa string, ttl time.Duration) (*Cert, error) {
	if ns == "" || sa == "" {
		return nil, fmt.Errorf("pki: workload identity needs a namespace and service account (got %q/%q)", ns, sa)
	}
	if ttl <= 0 {
		ttl = DefaultWorkloadTTL
	}
	id := SPIFFEID(ns, sa)
	// CSR + GenCertFromCSR is istiod's own signing path (IstioCA.sign), so the
	// leaf matches what istiod issues: empty subject, critical URI SAN,
	// server+client usage, backdated by istio's clock-skew grace.
	csrPEM, keyPEM, err := util.GenCSR(util.CertOptions{Host: id, ECSigAlg: util.EcdsaSigAlg, ECCCurve: util.P256Curve})
	if err != nil {
		return nil, fmt.Errorf("pki: CSR for %s: %w", id, err)
	}
	csr, err := util.ParsePemEncodedCSR(csrPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CSR for %s: %w", id, err)
	}
	der, err := util.GenCertFromCSR(csr, i.Cert, csr.PublicKey, i.key, []string{id}, ttl, false)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %s with %s intermediate: %w", id, i.Cluster, err)
	}
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chainPEM := concat(leafPEM, i.CertPEM)
	pair, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: key pair for %s: %w", id, err)
	}
	return &Cert{ID: id, ChainPEM: chainPEM, KeyPEM: keyPEM, RootPEM: clone(i.RootPEM), TLS: pair}, nil
}

// WriteDir writes cert-chain.pem, key.pem (0600) and root-cert.pem into dir
// (created 0700), the layout istio.io/istio/pkg/adsc Config.CertDir reads.
func (c *Cert) WriteDir(dir string) error {
	return writeFiles(dir, []file{
		{CertChainFile, c.ChainPEM, 0o644},
		{KeyFile, c.KeyPEM, 0o600},
		{RootCertFile, c.RootPEM, 0o644},
	})
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cert, err := util.ParsePemEncodedCertificate(certPEM)
	if err != nil {
		return nil, nil, err
	}
	k, err := util.ParsePemEncodedKey(keyPEM)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return cert, signer, nil
}

type file struct {
	name string
	data []byte
	mode os.FileMode
}

func writeFiles(dir string, files []file) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("pki: write %s: %w", f.name, err)
		}
	}
	return nil
}

// writeFile replaces path atomically with an exact mode: istiod watches its CA
// files, and os.WriteFile would keep a pre-existing file's looser mode.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// WriteSigningKeyPair writes a new ECDSA P-256 key pair in PEM (the private key to keyFile, the
// public to pubFile, both 0600): an API server's service-account token signing pair, which its
// controller-manager's token controller shares.
func WriteSigningKeyPair(keyFile, pubFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}
