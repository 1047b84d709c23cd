package nodecerts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/emulator/dataplane/nodecerts"
	"github.com/ambientmc/ambientmc/framework/bins/binstest"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// A certificate lifetime that istiod's 2-minute backdating would leave half over on arrival is
// refused before anything is asked of the cluster.
func TestALifetimeIstiodWouldHalveOnArrivalIsRefused(t *testing.T) {
	_, err := nodecerts.Start(context.Background(), nodecerts.Config{TTL: time.Minute})
	assert.ErrorContains(t, err, "ask for more than 2m0s")
}

const ns = "amc-certs"

// On a real API server and istiod (with CA_TRUSTED_NODE_ACCOUNTS as Istio's chart sets it): each
// node's ztunnel certificate client holds one certificate per identity among the ambient pods of
// its node, from istiod's CA for the ztunnel's pod-bound token; a pod that brings a new identity to
// a node costs istiod one CSR, one of an identity the node holds none, and the node's last pod of
// an identity going forgets it, so that identity's next pod there asks again. istiod's own
// counter agrees.
func TestNodesHoldOneCertificatePerIdentityOfTheirPods(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and istiod")
	}
	ctx := context.Background()
	pilot := binstest.PilotDiscovery(t, ctx)
	_, cs := localtest.APIServers(t, 1)
	c := cs[0]
	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate(c.Name)
	require.NoError(t, err)
	rootFile := filepath.Join(t.TempDir(), pki.RootCertFile)
	require.NoError(t, os.WriteFile(rootFile, inter.RootPEM, 0o600))

	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))
	_, err = c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, sa := range []string{"a", "b", "plain"} {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod := func(name, sa, node string, ip string) {
		t.Helper()
		p, err := c.Client.CoreV1().Pods(ns).Create(ctx, workload.NewPod(ns, name, sa, sa, node), metav1.CreateOptions{})
		require.NoError(t, err)
		if ip == "" {
			return
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		_, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	pod("a-1", "a", "node-a", "10.11.0.1")
	pod("a-2", "a", "node-a", "10.11.0.2")
	pod("b-1", "b", "node-a", "10.11.0.3")
	pod("a-3", "a", "node-b", "10.11.0.4")
	pod("no-ip", "b", "node-b", "")
	plain := workload.NewPod(ns, "plain", "plain", "plain", "node-a")
	delete(plain.Annotations, workload.RedirectionAnnotation) // not in ambient: no certificate
	_, err = c.Client.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{})
	require.NoError(t, err)

	istiod, err := hostistiod.Start(ctx, c, cluster.IstiodOptions{CA: mesh.CACertsOf(inter), Binary: pilot, Dir: t.TempDir(),
		Env: []string{"CA_TRUSTED_NODE_ACCOUNTS=" + pki.IstioNamespace + "/" + nodecerts.ZtunnelAccount}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = istiod.Stop() })
	sampler := mesh.SamplerOf(istiod.Endpoints())

	nodes, err := nodecerts.ServeNodes(ctx, nodecerts.Config{Client: c.Client, Cluster: c.Name, CAAddress: istiod.XDSAddress(), RootFile: rootFile, Logf: t.Logf},
		[]string{"node-a", "node-b"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, nodes.Wait(wctx))
	counts := nodes.Counts()
	assert.Equal(t, 2, counts.Nodes)
	assert.Equal(t, 4, counts.Pods, "the ambient pods with an address")
	assert.Equal(t, 3, counts.Identities, "node-a holds a and b, node-b holds a")
	zt, err := c.Client.CoreV1().Pods(pki.IstioNamespace).Get(ctx, nodecerts.ZtunnelAccount+"-node-a", metav1.GetOptions{})
	require.NoError(t, err, "the ztunnel's pod on its node, which istiod's node authorizer reads")
	assert.Equal(t, "node-a", zt.Spec.NodeName)

	issued := func() float64 {
		m, err := sampler.Scrape(ctx)
		require.NoError(t, err)
		return m.CertsIssued
	}
	assert.EqualValues(t, 3, issued(), "istiod signed one certificate per identity per node")
	assert.EqualValues(t, 3, nodes.Counts().Issued)

	pod("a-4", "a", "node-a", "10.11.0.5") // node-a holds a already
	pod("b-2", "b", "node-b", "10.11.0.6") // a new identity on node-b
	require.Eventually(t, func() bool { return nodes.Counts().Issued == 4 }, 30*time.Second, 50*time.Millisecond, "b's first pod on node-b asks for b")
	require.Eventually(t, func() bool { return nodes.Counts().Pods == 6 }, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, 4, nodes.Counts().Identities)

	require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, "b-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	require.Eventually(t, func() bool { return nodes.Counts().Identities == 3 }, 10*time.Second, 50*time.Millisecond, "node-a's last pod of b went: b is forgotten there")
	pod("b-3", "b", "node-a", "10.11.0.7")
	require.Eventually(t, func() bool { return nodes.Counts().Issued == 5 }, 30*time.Second, 50*time.Millisecond, "b's next pod on node-a asks again")
	require.NoError(t, nodes.Wait(wctx))
	assert.EqualValues(t, 5, issued(), "istiod's counter agrees")
	assert.Zero(t, nodes.Counts().Renewed, "a day's lifetime is not renewed within the test")
}
