package identity_test

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dataplane/identity"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
)

// On a real API server and a real istiod: istiod's CA signs for the service account of the token
// that authenticates the call (reviewed by the API server), under the cluster's intermediate, and
// refuses a token minted for another audience. No CA key is handed to the client.
func TestIstiodSignsForTheTokensServiceAccount(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and istiod")
	}
	ctx := context.Background()
	cache, err := bins.Default()
	require.NoError(t, err)
	if missing, err := cache.Missing(bins.PilotDiscovery); err != nil || len(missing) > 0 {
		t.Skipf("pilot-discovery not built (%v %v): run `make bins`", missing, err)
	}
	paths, err := cache.Ensure(ctx, bins.PilotDiscovery)
	require.NoError(t, err)
	_, cs := localtest.Clusters(t, 1)
	c := cs[0]
	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate(c.Name)
	require.NoError(t, err)
	istiod, err := hostistiod.Start(ctx, c, cluster.IstiodOptions{CA: mesh.CACertsOf(inter), Binary: paths[bins.PilotDiscovery], Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = istiod.Stop() })

	const ns, sa = "amc-identity", "echo"
	_, err = c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tokenFor := func(audience string) func() (string, error) {
		return func() (string, error) {
			tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
				Audiences: []string{audience}, ExpirationSeconds: new(int64(600))}}, metav1.CreateOptions{})
			if err != nil {
				return "", err
			}
			return tr.Status.Token, nil
		}
	}
	rootFile := filepath.Join(t.TempDir(), "root-cert.pem")
	require.NoError(t, os.WriteFile(rootFile, inter.RootPEM, 0o600))
	issuer := identity.Issuer{CAAddress: istiod.XDSAddress(), CAName: "istiod.istio-system.svc", ClusterID: c.Name, RootFile: rootFile,
		Token: tokenFor(identity.Audience)}

	cert, err := issuer.Issue(time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "spiffe://cluster.local/ns/"+ns+"/sa/"+sa, cert.ID)
	assert.True(t, cert.Root.Equal(root.Cert), "istiod sends the mesh root last")
	leaf := cert.Chain[0]
	assert.Equal(t, cert.Key.Public(), leaf.PublicKey, "the leaf is for the key this side made")
	assert.WithinDuration(t, time.Now().Add(time.Hour), leaf.NotAfter, 5*time.Minute)
	roots, inters := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(cert.Root)
	for _, i := range cert.Chain[1:] {
		inters.AddCert(i)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	assert.NoError(t, err, "the leaf chains to the mesh root through the cluster's intermediate")

	issuer.Token = tokenFor("not-istio-ca")
	_, err = issuer.Issue(time.Hour)
	assert.ErrorContains(t, err, "authenticate", "a token for another audience is refused")
}
