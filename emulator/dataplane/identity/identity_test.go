package identity_test

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/emulator/dataplane/identity"
	"github.com/ambientmc/ambientmc/framework/bins/binstest"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
)

// setup is one real API server and one istiod on this host that signs under the cluster's
// intermediate of a fresh mesh root.
type setup struct {
	ctx      context.Context
	c        *cluster.Cluster
	root     *pki.Root
	istiod   *hostistiod.Process
	rootFile string // the mesh root, as a pod mounts istio-ca-root-cert
}

// start starts the cluster, runs before(c) (objects istiod should find at startup), then istiod
// with env added to its environment.
func start(t *testing.T, before func(*setup), env ...string) *setup {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a kube-apiserver and istiod")
	}
	s := &setup{ctx: context.Background()}
	pilot := binstest.PilotDiscovery(t, s.ctx)
	_, cs := localtest.Clusters(t, 1)
	s.c = cs[0]
	var err error
	s.root, err = pki.NewRoot()
	require.NoError(t, err)
	inter, err := s.root.NewIntermediate(s.c.Name)
	require.NoError(t, err)
	s.rootFile = filepath.Join(t.TempDir(), "root-cert.pem")
	require.NoError(t, os.WriteFile(s.rootFile, inter.RootPEM, 0o600))
	if before != nil {
		before(s)
	}
	s.istiod, err = hostistiod.Start(s.ctx, s.c, cluster.IstiodOptions{CA: mesh.CACertsOf(inter), Binary: pilot, Dir: t.TempDir(), Env: env})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.istiod.Stop() })
	return s
}

// issuer reaches the istiod as a pod would, with tokens from token.
func (s *setup) issuer(t *testing.T, token func() (string, error)) *identity.Issuer {
	i := &identity.Issuer{CAAddress: s.istiod.XDSAddress(), CAName: "istiod.istio-system.svc", ClusterID: s.c.Name, RootFile: s.rootFile, Token: token}
	t.Cleanup(func() { _ = i.Close() })
	return i
}

// serviceAccount makes ns (unless it is there) and a service account in it.
func (s *setup) serviceAccount(t *testing.T, ns, sa string) {
	t.Helper()
	_, err := s.c.Client.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = s.c.Client.CoreV1().ServiceAccounts(ns).Create(s.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// pod makes a pod object running as ns/sa scheduled to node. No kubelet runs it (it stays Pending,
// and no Node object exists): istiod's node authorizer reads only spec.nodeName.
func (s *setup) pod(t *testing.T, ns, name, sa, node string) *corev1.Pod {
	t.Helper()
	p, err := s.c.Client.CoreV1().Pods(ns).Create(s.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		ServiceAccountName: sa, NodeName: node, AutomountServiceAccountToken: new(false),
		Containers: []corev1.Container{{Name: "c", Image: "none"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return p
}

// token mints tokens of ns/sa for audience, bound to pod when there is one (as the kubelet's
// projected tokens are: the API server then adds the pod's name and UID to the reviewed identity).
func (s *setup) token(ns, sa, audience string, pod *corev1.Pod) func() (string, error) {
	return func() (string, error) {
		spec := authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: new(int64(600))}
		if pod != nil {
			spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
		}
		tr, err := s.c.Client.CoreV1().ServiceAccounts(ns).CreateToken(s.ctx, sa, &authv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return tr.Status.Token, nil
	}
}

// On a real API server and a real istiod: istiod's CA signs for the service account of the token
// that authenticates the call (reviewed by the API server), under the cluster's intermediate, and
// refuses a token minted for another audience. No CA key is handed to the client.
func TestIstiodSignsForTheTokensServiceAccount(t *testing.T) {
	const ns, sa = "amc-identity", "echo"
	s := start(t, nil)
	s.serviceAccount(t, ns, sa)
	issuer := s.issuer(t, s.token(ns, sa, identity.Audience, nil))

	cert, err := issuer.Issue(time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "spiffe://cluster.local/ns/"+ns+"/sa/"+sa, cert.ID)
	assert.True(t, cert.Root.Equal(s.root.Cert), "istiod sends the mesh root last")
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

	_, err = issuer.IssueFor(time.Hour, pki.SPIFFEID(ns, "other"))
	assert.ErrorContains(t, err, "impersonation", "without CA_TRUSTED_NODE_ACCOUNTS istiod lets no one impersonate")
	assert.Eventually(t, func() bool {
		return s.istiod.Proc().LogContains("node authorizer (CA_TRUSTED_NODE_ACCOUNTS) is not configured")
	},
		10*time.Second, 100*time.Millisecond, "istiod refused for want of a node authorizer")

	issuer.Token = s.token(ns, sa, "not-istio-ca", nil)
	_, err = issuer.Issue(time.Hour)
	assert.ErrorContains(t, err, "authenticate", "a token for another audience is refused")
}

// Impersonation as ztunnel does it, against istiod's node authorizer: a caller among
// CA_TRUSTED_NODE_ACCOUNTS whose token is bound to its pod gets certificates for the service
// accounts of pods on its pod's node, and only those; a caller outside those accounts gets none.
func TestIstiodSignsForPodsOnTheCallersNode(t *testing.T) {
	const ns, node = "amc-identity", "node-a"
	var ztunnel, echoPod *corev1.Pod
	// The pods exist before istiod starts, so its pod informer lists them at startup.
	s := start(t, func(s *setup) {
		s.serviceAccount(t, mesh.SystemNamespace, "ztunnel")
		for _, sa := range []string{"echo", "db", "elsewhere", "nowhere"} {
			s.serviceAccount(t, ns, sa)
		}
		ztunnel = s.pod(t, mesh.SystemNamespace, "ztunnel-a", "ztunnel", node)
		echoPod = s.pod(t, ns, "echo-a", "echo", node)
		s.pod(t, ns, "db-a", "db", node)
		s.pod(t, ns, "elsewhere-b", "elsewhere", "node-b")
	}, "CA_TRUSTED_NODE_ACCOUNTS="+mesh.SystemNamespace+"/ztunnel")
	echo, db := pki.SPIFFEID(ns, "echo"), pki.SPIFFEID(ns, "db")
	issuer := s.issuer(t, s.token(mesh.SystemNamespace, "ztunnel", identity.Audience, ztunnel))

	var cert *identity.Certificate
	// istiod is ready before its node authorizer's pod informer need be: allow it to catch up.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		cert, err = issuer.IssueFor(time.Hour, echo)
		require.NoError(c, err)
	}, 30*time.Second, 200*time.Millisecond)
	assert.Equal(t, echo, cert.ID, "istiod signs for the impersonated identity")
	assert.Equal(t, cert.Key.Public(), cert.Chain[0].PublicKey)
	assert.True(t, cert.Root.Equal(s.root.Cert))
	own, err := issuer.Issue(time.Hour)
	require.NoError(t, err)
	assert.Equal(t, pki.SPIFFEID(mesh.SystemNamespace, "ztunnel"), own.ID, "without impersonation ztunnel gets its own identity")

	// One Issuer, one connection, many pods at once: as the emulated ztunnel asks.
	var wg sync.WaitGroup
	ids := map[string]string{}
	var mu sync.Mutex
	for k := range 6 {
		want := []string{echo, db}[k%2]
		wg.Go(func() {
			c, err := issuer.IssueFor(time.Hour, want)
			mu.Lock()
			defer mu.Unlock()
			if assert.NoError(t, err) {
				ids[want] = c.ID
			}
		})
	}
	wg.Wait()
	assert.Equal(t, map[string]string{echo: echo, db: db}, ids)

	for _, refused := range []struct{ id, why string }{
		{pki.SPIFFEID(ns, "elsewhere"), `no instances of "amc-identity/elsewhere" found on node "node-a"`},
		{pki.SPIFFEID(ns, "nowhere"), `no instances of "amc-identity/nowhere" found on node "node-a"`},
		{"not-a-spiffe-id", "failed to validate impersonated identity not-a-spiffe-id"},
	} {
		_, err := issuer.IssueFor(time.Hour, refused.id)
		assert.ErrorContains(t, err, "impersonation authentication failure", "%s is refused", refused.id)
		assert.Eventually(t, func() bool { return s.istiod.Proc().LogContains(refused.why) }, 10*time.Second, 100*time.Millisecond,
			"istiod refused %s: %s", refused.id, refused.why)
	}

	// ztunnel's service account with a token bound to no pod: istiod cannot tell its node.
	unbound := s.issuer(t, s.token(mesh.SystemNamespace, "ztunnel", identity.Audience, nil))
	_, err = unbound.IssueFor(time.Hour, echo)
	assert.ErrorContains(t, err, "impersonation authentication failure", "a token bound to no pod may not impersonate")
	assert.Eventually(t, func() bool { return s.istiod.Proc().LogContains("pod istio-system/ not found") }, 10*time.Second, 100*time.Millisecond)

	// A workload on the same node, with a pod-bound token, is no node proxy.
	workload := s.issuer(t, s.token(ns, "echo", identity.Audience, echoPod))
	_, err = workload.IssueFor(time.Hour, db)
	assert.ErrorContains(t, err, "impersonation authentication failure", "a caller outside CA_TRUSTED_NODE_ACCOUNTS may not impersonate")
	assert.Eventually(t, func() bool { return s.istiod.Proc().LogContains("is not allowed to impersonate") }, 10*time.Second, 100*time.Millisecond)
	mine, err := workload.Issue(time.Hour)
	require.NoError(t, err)
	assert.Equal(t, echo, mine.ID, "the same caller still gets its own identity")
}
