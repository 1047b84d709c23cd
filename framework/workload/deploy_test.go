package workload_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/provider/local"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
	. "github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// realClusters starts n real local clusters (kube-apiserver + etcd) and stops them when tb ends,
// or skips when the binaries are not built: building them takes minutes (`make bins`).
func realClusters(tb testing.TB, n int) (*local.Provider, []*cluster.Cluster) {
	tb.Helper()
	return localtest.Clusters(tb, n)
}

// watchedClient returns a copy of c whose protobuf client goes through rt, so a test can count
// the requests in flight or fail one on purpose; the API server stays real.
func watchedClient(t *testing.T, c *cluster.Cluster, rt func(http.RoundTripper) http.RoundTripper) *cluster.Cluster {
	t.Helper()
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.Wrap(rt)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	cp := *c
	cp.Client = client
	return &cp
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDeployRealClusters(t *testing.T) {
	_, cs := realClusters(t, 3)
	ctx := context.Background()

	// The second cluster, so addresses are not those of the first cluster by accident (indices come from the address-plan claims).
	t.Run("tiny scale", func(t *testing.T) {
		c := cs[1]
		require.NotEqual(t, cs[0].Index, c.Index)
		s := Scale{Name: "tiny", Services: 4, Pods: 10, Namespaces: 2, Nodes: 2}
		var calls [][3]any
		d, err := Deploy(ctx, c, s, func(cluster string, done, total int) { calls = append(calls, [3]any{cluster, done, total}) })
		require.NoError(t, err)
		checkTiny(t, c, s, d)
		require.NotEmpty(t, calls)
		assert.Equal(t, [3]any{"cluster-2", 10, 10}, calls[len(calls)-1], "a final progress call")
	})

	t.Run("second deploy fails naming the object", func(t *testing.T) {
		c := cs[1]
		_, err := Deploy(ctx, c, Scale{Name: "tiny", Services: 4, Pods: 10, Namespaces: 2, Nodes: 2}, nil)
		require.Error(t, err)
		assert.True(t, apierrors.IsAlreadyExists(err), "the API error is wrapped: %v", err)
		assert.Contains(t, err.Error(), "cluster cluster-2: create Node node-")
		assert.Contains(t, err.Error(), "already exists")
	})

	t.Run("bounded in flight, progress while loading", func(t *testing.T) {
		var inFlight, most atomic.Int64
		c := watchedClient(t, cs[0], func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				// A little latency so ticks fall inside the pod phase even on a fast machine.
				time.Sleep(2 * time.Millisecond)
				return next.RoundTrip(r)
			})
		})
		var mu sync.Mutex
		var done []int
		s := Scale{Name: "bounded", Services: 5, Pods: 200, Namespaces: 2, Nodes: 3}
		d, err := Deploy(ctx, c, s, func(cluster string, n, total int) {
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, "cluster-1", cluster)
			assert.Equal(t, 200, total)
			done = append(done, n)
		}, WithInFlight(4), WithProgressEvery(20*time.Millisecond))
		require.NoError(t, err)
		assert.Equal(t, 200, d.Pods)
		assert.LessOrEqual(t, most.Load(), int64(4), "never more than WithInFlight requests at once")
		assert.GreaterOrEqual(t, most.Load(), int64(2), "requests do run in parallel")

		mu.Lock()
		defer mu.Unlock()
		require.GreaterOrEqual(t, len(done), 2, "ticks during the pod phase, then the final call")
		assert.True(t, slices.IsSorted(done), "progress never goes back: %v", done)
		assert.Less(t, done[0], 200, "a tick before the end")
		assert.Equal(t, 200, done[len(done)-1])

		pods := listPods(t, cs[0], s)
		assert.Len(t, pods, 200)
	})

	t.Run("aborts on the first error", func(t *testing.T) {
		const failAt, limit = 20, 4
		var podPosts atomic.Int64
		c := watchedClient(t, cs[2], func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				// The 20th pod create is refused the way the API server refuses (a Status body).
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pods") && podPosts.Add(1) == failAt {
					body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods is forbidden: injected by the test","reason":"Forbidden","code":403}`
					return &http.Response{
						StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: r,
						Header: http.Header{"Content-Type": {"application/json"}},
						Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
					}, nil
				}
				return next.RoundTrip(r)
			})
		})
		s := Scale{Name: "abort", Services: 10, Pods: 300, Namespaces: 2, Nodes: 2}
		called := false
		_, err := Deploy(ctx, c, s, func(string, int, int) { called = true }, WithInFlight(limit), WithProgressEvery(time.Hour))
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "the API error is wrapped: %v", err)
		assert.Regexp(t, regexp.MustCompile(`^cluster cluster-3: create Pod scale-[01]/svc-\d+-\d+: pods is forbidden: injected by the test$`), err.Error())
		assert.False(t, called, "no final progress after a failure")

		created := len(listPods(t, cs[2], s))
		assert.Less(t, created, failAt+limit, "nothing new starts after the failure")
		assert.LessOrEqual(t, podPosts.Load(), int64(failAt+limit), "no pod creates sent after the failure beyond those in flight")
	})
}

func listPods(t *testing.T, c *cluster.Cluster, s Scale) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	for k := range s.Namespaces {
		l, err := c.Client.CoreV1().Pods(NamespaceName(k)).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		out = append(out, l.Items...)
	}
	return out
}

// checkTiny asserts what the brief asks of a deployed scale, reading everything back from the API server.
func checkTiny(t *testing.T, c *cluster.Cluster, s Scale, d *Deployed) {
	ctx := context.Background()
	core := c.Client.CoreV1()

	assert.Equal(t, c.Name, d.Cluster)
	assert.Equal(t, []string{"scale-0", "scale-1"}, d.Namespaces)
	assert.Equal(t, []types.NamespacedName{
		{Namespace: "scale-0", Name: "svc-0"}, {Namespace: "scale-1", Name: "svc-1"},
		{Namespace: "scale-0", Name: "svc-2"}, {Namespace: "scale-1", Name: "svc-3"},
	}, d.Services)
	assert.Equal(t, 10, d.Pods)
	assert.Positive(t, d.Elapsed)
	assert.InDelta(t, float64(d.Pods)/d.Elapsed.Seconds(), d.PodsPerSecond, 1e-9)

	// Nodes: region per cluster, zones cycling, Ready, addressed from the plan.
	nodes, err := core.Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 2)
	hostIPs := map[string]string{}
	for k, n := range nodes.Items {
		assert.Equal(t, fmt.Sprintf("node-%d", k), n.Name)
		assert.Equal(t, fmt.Sprintf("region-%d", c.Index), n.Labels[RegionLabel])
		assert.Equal(t, fmt.Sprintf("zone-%d", k%3), n.Labels[ZoneLabel])
		assert.Equal(t, corev1.ConditionTrue, nodeCondition(n, corev1.NodeReady), n.Name)
		assert.Equal(t, corev1.ConditionFalse, nodeCondition(n, corev1.NodeMemoryPressure), n.Name)
		ip, err := topology.NodeIP(c.Index, k)
		require.NoError(t, err)
		require.NotEmpty(t, n.Status.Addresses)
		assert.Equal(t, ip.String(), n.Status.Addresses[0].Address)
		hostIPs[n.Name] = ip.String()
	}

	// Namespaces labelled for ambient.
	for _, name := range d.Namespaces {
		ns, err := core.Namespaces().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "ambient", ns.Labels[DataplaneModeLabel], name)
	}

	// Services and service accounts.
	svcCIDR, err := topology.ServiceCIDR(c.Index)
	require.NoError(t, err)
	var gotSvcs, gotSAs []string
	for _, ns := range d.Namespaces {
		svcs, err := core.Services(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, svc := range svcs.Items {
			gotSvcs = append(gotSvcs, ns+"/"+svc.Name)
			assert.Equal(t, "true", svc.Labels[GlobalLabel], svc.Name)
			assert.Equal(t, map[string]string{"app": svc.Name}, svc.Spec.Selector)
			assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
			require.Len(t, svc.Spec.Ports, 1)
			p := svc.Spec.Ports[0]
			assert.Equal(t, "http", p.Name)
			assert.Equal(t, int32(80), p.Port)
			assert.Equal(t, int32(8080), p.TargetPort.IntVal)
			assert.True(t, svcCIDR.Contains(netip.MustParseAddr(svc.Spec.ClusterIP)), "ClusterIP %s in %s", svc.Spec.ClusterIP, svcCIDR)
		}
		sas, err := core.ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, sa := range sas.Items {
			if sa.Name != "default" { // the serviceaccount controller's
				gotSAs = append(gotSAs, ns+"/"+sa.Name)
			}
		}
	}
	want := []string{"scale-0/svc-0", "scale-0/svc-2", "scale-1/svc-1", "scale-1/svc-3"}
	assert.ElementsMatch(t, want, gotSvcs)
	assert.ElementsMatch(t, want, gotSAs, "one ServiceAccount per service besides default")

	// Pods: Running and Ready with unique addresses after the probe block, spread as specified.
	podCIDR, err := topology.PodCIDR(c.Index)
	require.NoError(t, err)
	firstScale, err := topology.PodIP(c.Index, ReservedPodIPs)
	require.NoError(t, err)
	pods := listPods(t, c, s)
	require.Len(t, pods, 10)
	seen := map[netip.Addr]string{}
	perService := map[string]int{}
	perNode := map[string]int{}
	for _, p := range pods {
		app := p.Labels["app"]
		perService[app]++
		perNode[p.Spec.NodeName]++
		assert.True(t, strings.HasPrefix(p.Name, app+"-"), "pod %s named after its service %s", p.Name, app)
		assert.Equal(t, s.ServiceNamespace(svcIndex(t, app)), p.Namespace, p.Name)
		assert.Equal(t, "enabled", p.Annotations[RedirectionAnnotation], p.Name)
		assert.Equal(t, app, p.Spec.ServiceAccountName, p.Name)
		require.NotNil(t, p.Spec.AutomountServiceAccountToken)
		assert.False(t, *p.Spec.AutomountServiceAccountToken)
		require.Len(t, p.Spec.Containers, 1)
		assert.Equal(t, "app", p.Spec.Containers[0].Name)
		assert.Equal(t, "fortio/fortio", p.Spec.Containers[0].Image)
		assert.Equal(t, int32(8080), p.Spec.Containers[0].Ports[0].ContainerPort)

		assert.Equal(t, corev1.PodRunning, p.Status.Phase, p.Name)
		for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
			assert.Equal(t, corev1.ConditionTrue, condition(p, ct), "%s %s", p.Name, ct)
		}
		assert.NotNil(t, p.Status.StartTime)
		require.NotEmpty(t, p.Spec.NodeName, p.Name)
		assert.Equal(t, hostIPs[p.Spec.NodeName], p.Status.HostIP, "hostIP is the node's address")

		ip, err := netip.ParseAddr(p.Status.PodIP)
		require.NoError(t, err, p.Name)
		require.Len(t, p.Status.PodIPs, 1)
		assert.Equal(t, p.Status.PodIP, p.Status.PodIPs[0].IP)
		assert.True(t, podCIDR.Contains(ip), "%s: %s outside %s", p.Name, ip, podCIDR)
		assert.GreaterOrEqual(t, ip.Compare(firstScale), 0, "%s: %s inside the probe block", p.Name, ip)
		if other, dup := seen[ip]; dup {
			t.Errorf("%s and %s share %s", p.Name, other, ip)
		}
		seen[ip] = p.Name
	}
	assert.Equal(t, map[string]int{"svc-0": 3, "svc-1": 3, "svc-2": 2, "svc-3": 2}, perService)
	assert.Equal(t, map[string]int{"node-0": 5, "node-1": 5}, perNode, "round-robin over the nodes")
	last, err := topology.PodIP(c.Index, ReservedPodIPs+9)
	require.NoError(t, err)
	assert.Contains(t, seen, firstScale, "addresses start right after the probe block")
	assert.Contains(t, seen, last, "and run on without gaps")
}

func svcIndex(t *testing.T, name string) int {
	var n int
	_, err := fmt.Sscanf(name, "svc-%d", &n)
	require.NoError(t, err, name)
	return n
}

func nodeCondition(n corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func condition(p corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// BenchmarkDeploy reports the loading rate (create + status update per pod) for 500 pods into a
// fresh cluster; the cluster start is not timed.
func BenchmarkDeploy(b *testing.B) {
	s := Scale{Name: "bench", Services: 50, Pods: 500, Namespaces: 5, Nodes: 5}
	var rate float64
	for range b.N {
		b.StopTimer()
		p, cs := realClusters(b, 1)
		b.StartTimer()
		d, err := Deploy(context.Background(), cs[0], s, nil)
		require.NoError(b, err)
		b.StopTimer()
		rate += d.PodsPerSecond
		_ = p.Destroy(context.Background()) // do not hold one cluster per iteration
		b.StartTimer()
	}
	b.ReportMetric(rate/float64(b.N), "pods/s")
}
