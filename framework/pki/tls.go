package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	"istio.io/istio/security/pkg/pki/util"
)

const spiffePrefix = "spiffe://"

// VerifySPIFFE returns a tls.Config.VerifyPeerCertificate hook that checks the
// presented chain against roots and requires the leaf's SPIFFE ID to be one of
// allowed; with none given, any identity in TrustDomain is accepted.
func VerifySPIFFE(roots *x509.CertPool, allowed ...string) func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
	allowed = slices.Clone(allowed)
	return func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
		if len(rawCerts) == 0 {
			return errors.New("pki: peer presented no certificate")
		}
		certs := make([]*x509.Certificate, len(rawCerts))
		for i, raw := range rawCerts {
			c, err := x509.ParseCertificate(raw)
			if err != nil {
				return fmt.Errorf("pki: parse peer certificate %d: %w", i, err)
			}
			certs[i] = c
		}
		ids, idErr := spiffeIDs(certs[0])
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		// Any usage: ztunnel checks identity, not the server/client EKU.
		if _, err := certs[0].Verify(x509.VerifyOptions{
			Roots:         roots,
			Intermediates: inter,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		}); err != nil {
			return fmt.Errorf("pki: peer %s does not chain to the mesh root: %w", describe(ids), err)
		}
		if idErr != nil {
			return fmt.Errorf("pki: peer identity: %w", idErr)
		}
		for _, id := range ids {
			if len(allowed) == 0 && strings.HasPrefix(id, spiffePrefix+TrustDomain+"/") {
				return nil
			}
			if slices.Contains(allowed, id) {
				return nil
			}
		}
		want := allowed
		if len(want) == 0 {
			want = []string{spiffePrefix + TrustDomain + "/*"}
		}
		return fmt.Errorf("pki: peer identity %s is not one of the expected %s", describe(ids), strings.Join(want, ", "))
	}
}

// PeerID returns the SPIFFE ID of the handshake's peer; the peer's chain was
// verified by VerifySPIFFE when the config came from ServerConfig or ClientConfig.
func PeerID(cs tls.ConnectionState) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errors.New("pki: no peer certificate")
	}
	ids, err := spiffeIDs(cs.PeerCertificates[0])
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// ServerConfig is ztunnel's inbound mTLS: TLS 1.3, ALPN h2, a client
// certificate required and checked by SPIFFE identity against roots.
func ServerConfig(c *Cert, roots *x509.CertPool, allowedClients ...string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.TLS},
		NextProtos:   []string{"h2"},
		// Go's own verification would apply hostname and EKU rules; the
		// SPIFFE hook does the chain check instead.
		ClientAuth:             tls.RequireAnyClientCert,
		VerifyPeerCertificate:  VerifySPIFFE(roots, allowedClients...),
		SessionTicketsDisabled: true,
	}
}

// ClientConfig is ztunnel's outbound mTLS: TLS 1.3, ALPN h2, no resumption,
// and the server checked by SPIFFE identity, never by hostname.
func ClientConfig(c *Cert, roots *x509.CertPool, allowedServers ...string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.TLS},
		NextProtos:   []string{"h2"},
		// Skips only Go's hostname-based check; VerifyPeerCertificate still
		// verifies the chain and identity, as ztunnel ignores SNI/hostnames.
		InsecureSkipVerify:     true, //nolint:gosec // replaced by VerifySPIFFE
		VerifyPeerCertificate:  VerifySPIFFE(roots, allowedServers...),
		SessionTicketsDisabled: true,
	}
}

// spiffeIDs reads the URI SAN with istio's parser, keeping only SPIFFE IDs.
func spiffeIDs(c *x509.Certificate) ([]string, error) {
	all, err := util.ExtractIDs(c.Extensions)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, id := range all {
		if strings.HasPrefix(id, spiffePrefix) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("pki: certificate has no SPIFFE ID (SANs %v)", all)
	}
	return ids, nil
}

func describe(ids []string) string {
	if len(ids) == 0 {
		return "(no SPIFFE ID)"
	}
	return strings.Join(ids, ", ")
}
