package mesh_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
)

// writeInternalKubeconfig writes a kubeconfig for c's API server in the shape users hand the kube
// provider: the cluster entry as given (CA by file, TLS and proxy settings), a user entry the
// remote secret must not need, and returns its path.
func writeInternalKubeconfig(t *testing.T, dir string, server *clientcmdapi.Cluster) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["real"] = server
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: "does-not-exist.crt"}
	cfg.Contexts["real"] = &clientcmdapi.Context{Cluster: "real", AuthInfo: "admin"}
	cfg.Contexts["other"] = &clientcmdapi.Context{Cluster: "missing", AuthInfo: "missing"}
	cfg.CurrentContext = "real"
	path := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	require.NoError(t, os.Chmod(path, 0o600))
	return path
}

// secretClient builds a client from the kubeconfig inside a remote secret, as a remote istiod does.
func secretClient(t *testing.T, c *cluster.Cluster) (*clientcmdapi.Cluster, kubernetes.Interface) {
	t.Helper()
	s, err := mesh.RemoteSecret(context.Background(), c)
	require.NoError(t, err)
	data := s.Data[c.Name]
	cfg, err := clientcmd.Load(data)
	require.NoError(t, err)
	rc, err := clientcmd.RESTConfigFromKubeConfig(data)
	require.NoError(t, err)
	client, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cfg.Clusters[c.Name], client
}

// connectProxy is an HTTP CONNECT proxy on loopback that counts the tunnels it opened.
func connectProxy(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var tunnels atomic.Int32
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		down, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		tunnels.Add(1)
		go func() { _, _ = io.Copy(up, down); up.Close() }()
		go func() { _, _ = io.Copy(down, up); down.Close() }()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String(), &tunnels
}

// The remote secret of a cluster whose kubeconfig references its CA by file (minikube's and most
// hand-written kubeconfigs do) must carry the CA inline and keep the TLS and proxy settings: a
// remote istiod reads it far from those files. Checked against a real API server.
func TestRemoteSecretFromFileBasedKubeconfigOnRealAPIServer(t *testing.T) {
	_, cs := localtest.Clusters(t, 1)
	ctx := context.Background()
	real := cs[0]
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, real))
	given, err := clientcmd.LoadFromFile(real.InternalKubeconfig)
	require.NoError(t, err)
	var entry *clientcmdapi.Cluster
	for _, e := range given.Clusters {
		entry = e
	}
	caPEM := entry.CertificateAuthorityData
	block, _ := pem.Decode(caPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.NotEmpty(t, cert.DNSNames, "the API server's self-signed certificate names its DNS SANs")

	// with returns c with an internal kubeconfig holding entry (written into its own directory).
	with := func(t *testing.T, e *clientcmdapi.Cluster) *cluster.Cluster {
		c := *real
		c.InternalKubeconfig = writeInternalKubeconfig(t, t.TempDir(), e)
		return &c
	}
	caFile := func(t *testing.T) string {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), caPEM, 0o600))
		return dir
	}

	t.Run("CAByRelativePathIsInlined", func(t *testing.T) {
		dir := caFile(t)
		c := *real
		c.InternalKubeconfig = writeInternalKubeconfig(t, dir, &clientcmdapi.Cluster{Server: entry.Server, CertificateAuthority: "ca.crt"})
		got, client := secretClient(t, &c)
		assert.Empty(t, got.CertificateAuthority, "no file reference is left")
		assert.Equal(t, caPEM, got.CertificateAuthorityData)
		_, err := client.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		assert.NoError(t, err, "the secret's kubeconfig verifies the real API server and reads as istio-reader")
	})

	t.Run("TLSServerNameIsKept", func(t *testing.T) {
		dir := caFile(t)
		e := &clientcmdapi.Cluster{Server: entry.Server, CertificateAuthority: filepath.Join(dir, "ca.crt"), TLSServerName: cert.DNSNames[0]}
		got, client := secretClient(t, with(t, e))
		assert.Equal(t, cert.DNSNames[0], got.TLSServerName)
		_, err := client.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		assert.NoError(t, err, "the server is verified under the name %s", cert.DNSNames[0])

		// A name the certificate does not carry fails: the name is what the secret verifies.
		e.TLSServerName = "not-a-san.invalid"
		_, client = secretClient(t, with(t, e))
		_, err = client.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not-a-san.invalid")
	})

	t.Run("InsecureSkipTLSVerifyAndProxyURLAreKept", func(t *testing.T) {
		proxy, tunnels := connectProxy(t)
		got, client := secretClient(t, with(t, &clientcmdapi.Cluster{Server: entry.Server, InsecureSkipTLSVerify: true, ProxyURL: proxy}))
		assert.True(t, got.InsecureSkipTLSVerify)
		assert.Equal(t, proxy, got.ProxyURL)
		_, err := client.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Positive(t, tunnels.Load(), "the request went through the kubeconfig's proxy")
	})
}

// A CA file that is not there fails before anything is created in the cluster, naming the
// kubeconfig.
func TestRemoteSecretMissingCAFileIsOneClearError(t *testing.T) {
	dir := t.TempDir()
	c := &cluster.Cluster{InternalKubeconfig: writeInternalKubeconfig(t, dir, &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443", CertificateAuthority: "gone.crt"})}
	c.Name = "cluster-1"
	_, err := mesh.RemoteSecret(context.Background(), c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster cluster-1: internal kubeconfig "+c.InternalKubeconfig)
	assert.Contains(t, err.Error(), "gone.crt")
	assert.Contains(t, err.Error(), "embed certificate-authority-data")
}
