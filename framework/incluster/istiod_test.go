package incluster

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// istiodPod creates a Running, Ready pod labelled app=istiod, its status written as a kubelet
// would (there is none here).
func istiodPod(t *testing.T, c *cluster.Cluster, name string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pods := c.Client.CoreV1().Pods(mesh.SystemNamespace)
	p := workload.NewPod(mesh.SystemNamespace, name, "istiod", "default", "node-0")
	p, err := pods.Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	p.Status = workload.RunningStatus(netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.1.1"), true)
	p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return p
}

// istiodCluster is a local cluster with istio-system and its default service account, where
// istiodPod can create pods.
func istiodCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	c := localClusters(t, 1)[0]
	ctx := context.Background()
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))
	// The serviceaccount controller may have made it already.
	_, err := c.Client.CoreV1().ServiceAccounts(mesh.SystemNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	return c
}

func handleOn(t *testing.T, c *cluster.Cluster, pod *corev1.Pod, logFile string) *IstiodPod {
	t.Helper()
	i, err := newIstiodHandle(c, pod, logFile)
	require.NoError(t, err)
	return i
}

func waitDone(t *testing.T, i *IstiodPod) {
	t.Helper()
	select {
	case <-i.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done was not closed")
	}
}

func notDone(t *testing.T, i *IstiodPod) {
	t.Helper()
	select {
	case <-i.Done():
		t.Fatalf("Done closed while the pod runs: %v", i.ExitErr())
	case <-time.After(500 * time.Millisecond):
	}
}

// The handle's watch on a real API server: Done closes when the pod restarts or is deleted
// (Kill: no grace period), and ExitErr says which. Port-forwards need a kubelet and are not
// exercised here.
func TestIstiodHandleSeesRestartAndKill(t *testing.T) {
	t.Parallel() // each on its own local cluster; most of the time is waiting on it
	c := istiodCluster(t)
	ctx := context.Background()

	old := istiodPod(t, c, "istiod-old")
	time.Sleep(1100 * time.Millisecond) // creation timestamps have second resolution
	istiodPod(t, c, "istiod-new")
	got, err := readyIstiodPod(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, "istiod-new", got.Name, "the newest ready pod")

	dir := t.TempDir()
	logFile := filepath.Join(dir, "istiod.log")
	require.NoError(t, os.WriteFile(logFile, []byte("one\ntwo\nthree\n"), 0o600))

	restarted := handleOn(t, c, old, logFile)
	t.Cleanup(restarted.closeLocal)
	assert.Equal(t, "two\nthree", restarted.Tail(2))
	assert.Nil(t, restarted.ExitErr())
	notDone(t, restarted)
	p, err := c.Client.CoreV1().Pods(mesh.SystemNamespace).Get(ctx, old.Name, metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.ContainerStatuses[0].RestartCount = 1
	_, err = c.Client.CoreV1().Pods(mesh.SystemNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitDone(t, restarted)
	assert.ErrorContains(t, restarted.ExitErr(), "istiod pod istio-system/istiod-old restarted (1 restarts)")

	killed := handleOn(t, c, got, logFile)
	t.Cleanup(killed.closeLocal)
	notDone(t, killed) // and the watch has listed the pod
	require.NoError(t, killed.Kill())
	waitDone(t, killed)
	assert.ErrorContains(t, killed.ExitErr(), "istiod pod istio-system/istiod-new was deleted")
	assert.NoError(t, killed.Kill(), "killing a pod that is gone already is what Kill is for, not an error")
	_, err = readyIstiodPod(ctx, c)
	require.NoError(t, err, "istiod-old is still there")

	// A handle on a pod that is already gone is done at once.
	gone := handleOn(t, c, got, logFile)
	t.Cleanup(gone.closeLocal)
	waitDone(t, gone)
	assert.ErrorContains(t, gone.ExitErr(), "is gone")
}

// A second istiod and the probes are offered exactly where they can run: an extra istiod with the
// images make images builds or images whose build -istio.build names (it runs that build on this
// host), the probes with images that carry a
// data plane (real ones, or the emulated one of the built images unless -istio.dataplane=none).
func TestCapabilitiesFollowTheImages(t *testing.T) {
	real := newProvider(t, false)
	_, err := real.StartIstiod(context.Background(), &cluster.Cluster{}, cluster.IstiodOptions{Name: "extra"})
	assert.ErrorContains(t, err, "cluster.ExtraIstiods", "StartIstiod starts the cluster's own istiod only")
	_, extra := real.ControlPlane().(cluster.ExtraIstiods)
	assert.False(t, extra, "no second istiod beside real Istio images: this host has no pilot-discovery of their build")
	_, probes := real.Offered().(probe.Deployer)
	assert.True(t, probes, "real Istio images carry ztunnel and the gateway")
	assert.Equal(t, report.DataPlaneZtunnel, real.Facts().DataPlane)

	named, err := New(Options{Name: "kube", RunDir: t.TempDir(), Images: install.Images{Hub: "example.com/me", Tag: "dev", Build: "v0.0.0-20260827124520-eed52ebb66ad"}})
	require.NoError(t, err)
	_, extra = named.ControlPlane().(cluster.ExtraIstiods)
	assert.True(t, extra, "-istio.build names real images' build: this host builds that pilot-discovery")

	built, err := New(Options{Name: "kube", RunDir: t.TempDir(), Images: install.Images{Hub: images.IstioHub, Tag: "eed52ebb66ad"}})
	require.NoError(t, err)
	_, extra = built.ControlPlane().(cluster.ExtraIstiods)
	assert.True(t, extra, "the images make images builds are the binary cache's build")
	_, probes = built.Offered().(probe.Deployer)
	assert.True(t, probes, "the images make images builds carry the emulated data plane")
	assert.Equal(t, report.DataPlaneEmulated, built.Facts().DataPlane)

	bare, err := New(Options{Name: "kube", RunDir: t.TempDir(), Images: install.Images{Hub: images.IstioHub, Tag: "eed52ebb66ad", DataPlane: report.DataPlaneNone}})
	require.NoError(t, err)
	_, probes = bare.Offered().(probe.Deployer)
	assert.False(t, probes, "-istio.dataplane=none: istiod only")
	assert.Equal(t, report.DataPlaneNone, bare.Facts().DataPlane)
}

// Restart on a real API server, with the port-forward replaced (there is no kubelet to forward
// to, so the test stands in for it with a TCP server per pod that names the pod): the pod is
// deleted, a connection open to it ends as soon as it is gone, connections while no pod is ready
// are refused at once (a client of a forward to a dead pod would wait for gRPC's 20 s connect
// timeout), and the handle reaches the Deployment's next Ready pod on the same local ports.
func TestIstiodRestartFollowsTheNextPod_FakePortForward(t *testing.T) {
	c := istiodCluster(t)
	ctx := context.Background()
	var forwarded []string
	old := forwardIstiod
	t.Cleanup(func() { forwardIstiod = old })
	forwardIstiod = func(_ *cluster.Cluster, pod string, _ io.Writer) (*forward, error) {
		forwarded = append(forwarded, pod)
		return podNamingForward(t, pod), nil
	}
	first := istiodPod(t, c, "istiod-a")
	i := handleOn(t, c, first, filepath.Join(t.TempDir(), "istiod.log"))
	t.Cleanup(i.closeLocal)
	require.NoError(t, i.reach())
	xds := i.XDSAddress()
	open, name := dialPod(t, xds)
	require.Equal(t, "istiod-a", name)
	firstDone := i.Done()

	require.NoError(t, i.Kill())
	waitDone(t, i)
	require.NoError(t, open.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := open.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the connection to the killed pod ends with it")
	gap, err := net.Dial("tcp", xds)
	require.NoError(t, err, "the local port stays")
	require.NoError(t, gap.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = gap.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "with no pod to reach, a connection is closed at once")
	gap.Close()

	go func() {
		time.Sleep(1100 * time.Millisecond) // the Deployment's next pod, a second later
		istiodPod(t, c, "istiod-b")
	}()
	require.NoError(t, i.Restart(ctx))
	select {
	case <-firstDone:
	default:
		t.Fatal("the first pod's handle is still open")
	}
	_, err = c.Client.CoreV1().Pods(mesh.SystemNamespace).Get(ctx, "istiod-a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the first pod was deleted: %v", err)
	assert.Equal(t, "istiod-b", i.handle().pod)
	notDone(t, i)
	assert.Equal(t, []string{"istiod-a", "istiod-b"}, forwarded)
	assert.Equal(t, xds, i.XDSAddress(), "xDS clients reconnect where they were")
	next, name := dialPod(t, xds)
	defer next.Close()
	assert.Equal(t, "istiod-b", name, "the same local port reaches the next pod")
}

// podNamingForward stands in for a port-forward to pod: on each istiod port a TCP server that
// writes the pod's name and a newline to every connection and holds it open until it stops.
func podNamingForward(t *testing.T, pod string) *forward {
	t.Helper()
	f := &forward{pod: pod, local: map[int]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	var ls []net.Listener
	for _, p := range istiodPorts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		f.local[p] = l.Addr().(*net.TCPAddr).Port
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, pod+"\n")
				go func() { <-f.stop; c.Close() }()
			}
		}()
	}
	go func() {
		<-f.stop
		for _, l := range ls {
			l.Close()
		}
		close(f.done)
	}()
	t.Cleanup(f.Close)
	return f
}

// dialPod connects to addr and reads the name the pod behind it writes.
func dialPod(t *testing.T, addr string) (net.Conn, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	return c, strings.TrimSpace(line)
}
