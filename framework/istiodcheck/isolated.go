package istiodcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/faults"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/mesh"
)

// Isolated is an istiod of one check's own: a fresh process for cluster c whose POD_NAMESPACE
// is a namespace only that check writes remote secrets into. POD_NAMESPACE is istiod's --namespace
// default (pilot/cmd/pilot-discovery/app/cmd.go) and the namespace its secret controller watches
// (pilot/pkg/bootstrap/server.go initMulticluster: SystemNamespace: args.Namespace), so the
// suite's istiods (istio-system), its membership and the other checks never see them: checks on
// isolated istiods run in parallel. It stops when the test ends.
type Isolated struct {
	*mesh.Istiod
	c   *cluster.Cluster
	ns  string
	run *Run
	// expect is what its clients hold: only the remote clusters the check gave it.
	expect join.Expect
}

// Isolated starts an isolated istiod for c from the run's istiod build, with extra environment env.
func (r *Run) Isolated(t *testing.T, ctx context.Context, c *cluster.Cluster, env ...string) *Isolated {
	t.Helper()
	return r.IsolatedOf(t, ctx, c, "", env...)
}

// IsolatedOf starts an isolated istiod for c built from istio.io/istio module version ("": the
// run's istiod), with extra environment env.
func (r *Run) IsolatedOf(t *testing.T, ctx context.Context, c *cluster.Cluster, version string, env ...string) *Isolated {
	t.Helper()
	ns := NamespaceOf(t.Name())
	// istiod reads each cluster's network from its own namespace's label there.
	for _, o := range r.Clusters {
		require.NoError(t, mesh.EnsureNetworkNamespace(ctx, o, ns))
		// Left behind, the namespace and what the isolated istiod writes there would come with
		// every later join (docs/measurements.md#why-the-settings-are-what-they-are).
		t.Cleanup(func() {
			_ = o.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		})
	}
	i := r.ExtraIstiod(t, ctx, c, version, append([]string{"POD_NAMESPACE=" + ns}, env...)...)
	return &Isolated{Istiod: i, c: c, ns: ns, run: r, expect: r.expect().Isolated()}
}

// NamespaceOf names a check's namespace after its test: a DNS label of at most 63 characters.
func NamespaceOf(test string) string {
	slug := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(test), "-"), "-")
	ns := "amc-" + slug
	if len(ns) > 63 {
		// Subtests share long prefixes ("attempt 0" to "attempt 3"): keep a hash of the whole name.
		sum := sha256.Sum256([]byte(slug))
		ns = strings.TrimRight(ns[:54], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	return ns
}

// Namespace is where the istiod reads remote secrets.
func (s *Isolated) Namespace() string { return s.ns }

// Secrets is the client of the check's secrets.
func (s *Isolated) Secrets() interface {
	Create(context.Context, *corev1.Secret, metav1.CreateOptions) (*corev1.Secret, error)
	Update(context.Context, *corev1.Secret, metav1.UpdateOptions) (*corev1.Secret, error)
} {
	return s.c.Client.CoreV1().Secrets(s.ns)
}

// Direct is a remote secret for remote under cluster ID id, with a fresh token.
func (s *Isolated) Direct(t *testing.T, remote *cluster.Cluster, id string) *corev1.Secret {
	t.Helper()
	sec, err := mesh.RemoteSecret(s.run.RunContext(), remote)
	require.NoError(t, err)
	out := mesh.SecretFor(id, sec.Data[remote.Name])
	out.Namespace = s.ns
	return out
}

// Slow is a remote secret for remote (as cluster ID id) that reaches its API server through a
// delaying proxy on 127.0.0.1, and the proxy, which closes when the test ends. The secret names
// the API server's own address as the TLS server name, so its certificate still verifies.
func (s *Isolated) Slow(t *testing.T, remote *cluster.Cluster, id string, d faults.Delay) (*corev1.Secret, *faults.Proxy) {
	t.Helper()
	sec, err := mesh.RemoteSecret(s.run.RunContext(), remote)
	require.NoError(t, err)
	cfg, err := clientcmd.Load(sec.Data[remote.Name])
	require.NoError(t, err)
	var p *faults.Proxy
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		require.NoError(t, err)
		p, err = faults.Listen(u.Host, d)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
	}
	out, err := s.throughProxy(sec, remote, id, p)
	require.NoError(t, err)
	return out, p
}

// Through is a remote secret for remote under cluster ID id, with a fresh token, whose server is
// the proxy p (a rotation of a secret slow made).
func (s *Isolated) Through(remote *cluster.Cluster, id string, p *faults.Proxy) (*corev1.Secret, error) {
	sec, err := mesh.RemoteSecret(s.run.RunContext(), remote)
	if err != nil {
		return nil, err
	}
	return s.throughProxy(sec, remote, id, p)
}

// throughProxy rewrites remote's secret sec to reach it through p, under cluster ID id.
func (s *Isolated) throughProxy(sec *corev1.Secret, remote *cluster.Cluster, id string, p *faults.Proxy) (*corev1.Secret, error) {
	cfg, err := clientcmd.Load(sec.Data[remote.Name])
	if err != nil {
		return nil, err
	}
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			return nil, err
		}
		if cl.TLSServerName == "" {
			cl.TLSServerName = u.Hostname() // the certificate is for the API server's address
		}
		u.Host = p.Addr()
		cl.Server = u.String()
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, err
	}
	out := mesh.SecretFor(id, data)
	out.Namespace = s.ns
	return out, nil
}

// Add writes a secret for the istiod to read; it is removed when the test ends.
func (s *Isolated) Add(t *testing.T, sec *corev1.Secret) {
	t.Helper()
	_, err := s.c.Client.CoreV1().Secrets(sec.Namespace).Create(s.run.RunContext(), sec, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Remove(sec) })
}

// Remove deletes a secret (gone already is fine).
func (s *Isolated) Remove(sec *corev1.Secret) error {
	err := s.c.Client.CoreV1().Secrets(sec.Namespace).Delete(context.Background(), sec.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
