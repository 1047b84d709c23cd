package incluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

var (
	probeApps = []string{probe.EchoRemote, probe.EchoFailover}
	cluster2  = topologyRef{name: "cluster-2", network: "network-2"}
)

// converged is testdata/ztunnel-config-dump.json: what the client ztunnel in cluster-1 holds once
// istiod pushed cluster-2's split-horizon workloads (pilot/pkg/serviceregistry/ambient/
// multicluster.go createSplitHorizonWorkload), written by hand in ztunnel's serialization at
// realfmt.ZtunnelCommit: src/admin.rs ConfigDump, src/state.rs ProxyStateSerialization,
// src/state/workload.rs, src/state/service.rs. TestZtunnelDumpFixtureIsZtunnels checks every key
// and enum value against realfmt's table, which cites each field's line.
func converged(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ztunnel-config-dump.json"))
	require.NoError(t, err)
	return data
}

// edited returns the dump with edit applied to its decoded JSON.
func edited(t *testing.T, data []byte, edit func(workloads, services []any)) []byte {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(data, &d))
	edit(d["workloads"].([]any), d["services"].([]any))
	out, err := json.Marshal(d)
	require.NoError(t, err)
	return out
}

// beforeFailoverConverged is the dump before the echo-failover split-horizon workload arrived:
// echo-failover answers (locally), but the client's ztunnel has nowhere to fail over to.
func beforeFailoverConverged(t *testing.T) []byte {
	return edited(t, converged(t), func(_, services []any) {
		for _, s := range services {
			svc := s.(map[string]any)
			if svc["name"] != probe.EchoFailover {
				continue
			}
			eps := svc["endpoints"].(map[string]any)
			for k := range eps {
				if strings.Contains(k, "SplitHorizonWorkload") {
					delete(eps, k)
				}
			}
		}
	})
}

func TestReadZtunnelDumpFindsRemoteEndpoints(t *testing.T) {
	held, err := readZtunnelDump(converged(t), workload.ProbeNamespace, probeApps, cluster2)
	require.NoError(t, err)
	assert.Equal(t, 1, held[probe.EchoRemote].remoteHealthy)
	assert.Equal(t, uint32(2), held[probe.EchoRemote].remoteCapacity, "the split-horizon workload stands for cluster-2's 2 pods")
	assert.Equal(t, 1, held[probe.EchoFailover].remoteHealthy, "the split-horizon workload, not the local pod")
	assert.Empty(t, missingRemote(held, probeApps, cluster2))

	t.Run("LocalEndpointOnlyIsMissing", func(t *testing.T) {
		held, err := readZtunnelDump(beforeFailoverConverged(t), workload.ProbeNamespace, probeApps, cluster2)
		require.NoError(t, err)
		assert.Equal(t, "echo-failover: no Healthy endpoint of cluster cluster-2 on network network-2 (endpoints network-1/cluster-1 Healthy)",
			missingRemote(held, probeApps, cluster2))
	})
	t.Run("UnhealthyRemoteIsMissing", func(t *testing.T) {
		data := edited(t, converged(t), func(workloads, _ []any) {
			for _, w := range workloads {
				if wl := w.(map[string]any); strings.HasSuffix(wl["uid"].(string), "/echo-remote.probe.svc.cluster.local") {
					wl["status"] = "Unhealthy"
				}
			}
		})
		held, err := readZtunnelDump(data, workload.ProbeNamespace, probeApps, cluster2)
		require.NoError(t, err)
		assert.Contains(t, missingRemote(held, probeApps, cluster2), "echo-remote: no Healthy endpoint of cluster cluster-2 on network network-2 (endpoints network-2/cluster-2 Unhealthy)")
	})
	t.Run("AbsentServiceIsMissing", func(t *testing.T) {
		held, err := readZtunnelDump(converged(t), "elsewhere", probeApps, cluster2)
		require.NoError(t, err)
		assert.Equal(t, "echo-remote: no such Service in the config dump; echo-failover: no such Service in the config dump", missingRemote(held, probeApps, cluster2))
	})
	t.Run("NotADump", func(t *testing.T) {
		_, err := readZtunnelDump([]byte("<html>admin</html>"), workload.ProbeNamespace, probeApps, cluster2)
		require.Error(t, err)
	})
}

// Istio's own sample dump (istioctl's ztunnel-config testdata, from an older ztunnel that keyed
// workloads and services by address) reads the same way: the reader takes both layouts.
func TestReadZtunnelDumpTakesIstiosSampleDump(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio").Output()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "istioctl/pkg/writer/ztunnel/configdump/testdata/dump.json"))
	require.NoError(t, err)
	// The sample is multi-network: reviews-v3 runs on network3, the other bookinfo pods carry no
	// network.
	held, err := readZtunnelDump(data, "bookinfo", []string{"productpage", "reviews"}, topologyRef{name: "Kubernetes", network: "network3"})
	require.NoError(t, err)
	assert.Equal(t, 0, held["productpage"].remoteHealthy)
	assert.Equal(t, 1, held["reviews"].remoteHealthy, "reviews-v3, the one endpoint on network3")
	assert.Equal(t, []string{"/Kubernetes Healthy", "/Kubernetes Healthy", "network3/Kubernetes Healthy"}, held["reviews"].endpoints)
	held, err = readZtunnelDump(data, "bookinfo", []string{"productpage"}, topologyRef{name: "Kubernetes"})
	require.NoError(t, err)
	assert.Equal(t, 1, held["productpage"].remoteHealthy)
}

// dumpServer serves /config_dump on loopback as a ztunnel admin port would: the first `before`
// reads return old, then converged.
func dumpServer(t *testing.T, old, converged []byte, before int32) (string, *atomic.Int32) {
	var reads atomic.Int32
	base := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/config_dump" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if reads.Add(1) <= before {
			_, _ = w.Write(old)
			return
		}
		_, _ = w.Write(converged)
	}))
	return strings.TrimPrefix(base, "http://"), &reads
}

func TestWaitZtunnelHoldsAgainstAdminServer(t *testing.T) {
	t.Run("WaitsForTheRemoteEndpoint", func(t *testing.T) {
		addr, reads := dumpServer(t, beforeFailoverConverged(t), converged(t), 3)
		fetch := func(ctx context.Context) ([]byte, error) { return fetchConfigDump(ctx, addr) }
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, waitZtunnelHolds(ctx, fetch, workload.ProbeNamespace, probeApps, cluster2, 20*time.Millisecond))
		assert.Equal(t, int32(4), reads.Load(), "returned on the first read that held both")
	})
	t.Run("TimesOutSayingWhatIsMissing", func(t *testing.T) {
		addr, _ := dumpServer(t, beforeFailoverConverged(t), nil, 1<<30)
		fetch := func(ctx context.Context) ([]byte, error) { return fetchConfigDump(ctx, addr) }
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := waitZtunnelHolds(ctx, fetch, workload.ProbeNamespace, probeApps, cluster2, 20*time.Millisecond)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "echo-failover: no Healthy endpoint of cluster cluster-2 on network network-2")
		assert.NotContains(t, err.Error(), "echo-remote")
	})
	t.Run("AdminErrorsAreRetriedAndReported", func(t *testing.T) {
		base := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "starting", http.StatusServiceUnavailable) }))
		fetch := func(ctx context.Context) ([]byte, error) {
			return fetchConfigDump(ctx, strings.TrimPrefix(base, "http://"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := waitZtunnelHolds(ctx, fetch, workload.ProbeNamespace, probeApps, cluster2, 20*time.Millisecond)
		require.ErrorContains(t, err, "reading the config dump: status 503 Service Unavailable")
	})
}

func runningPod(ns, name, node string, labels map[string]string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

// clientPodIP is the fake client pod's address.
const clientPodIP = "10.11.0.10"

// probeClusters are the client's cluster (fake clientset: the client pod on node-b, ztunnels on
// node-a and node-b, plus a not-ready one on node-b) and the remote cluster.
func probeClusters() (*cluster.Cluster, *cluster.Cluster) {
	zt := map[string]string{"app": "ztunnel"}
	client := runningPod(workload.ProbeNamespace, "fortio-client-1", "node-b", map[string]string{"app": install.FortioClient}, true)
	client.Status.PodIP = clientPodIP
	cs := fake.NewClientset(
		client,
		runningPod(mesh.SystemNamespace, "ztunnel-a", "node-a", zt, true),
		runningPod(mesh.SystemNamespace, "ztunnel-0-old", "node-b", zt, false),
		runningPod(mesh.SystemNamespace, "ztunnel-b", "node-b", zt, true),
	)
	local := &cluster.Cluster{Cluster: topology.Cluster{Name: "cluster-1", Network: "network-1"}, Client: cs}
	remote := &cluster.Cluster{Cluster: topology.Cluster{Name: "cluster-2", Network: "network-2"}}
	return local, remote
}

func TestNodeZtunnelIsTheClientNodes_FakeClientset(t *testing.T) {
	local, _ := probeClusters()
	ctx := context.Background()
	client, err := readyPod(ctx, local, workload.ProbeNamespace, install.FortioClient)
	require.NoError(t, err)
	zt, err := nodeZtunnel(ctx, local, mesh.SystemNamespace, client)
	require.NoError(t, err)
	assert.Equal(t, "ztunnel-b", zt.Name)

	client.Spec.NodeName = "node-c"
	_, err = nodeZtunnel(ctx, local, mesh.SystemNamespace, client)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no ready ztunnel in istio-system on node node-c, where fortio-client-1 runs (ztunnels: ztunnel-0-old on node-b, ztunnel-a on node-a, ztunnel-b on node-b)")
}

// Ready keeps the seam's promise: after every app answered (here a stand-in for the mesh answers
// through the client's fortio fetch proxy), it returns only once the client node's ztunnel holds
// the remote endpoints, read from that ztunnel's config dump.
func TestReadyWaitsForTheClientZtunnel_FakeClientset(t *testing.T) {
	var caller atomic.Value // what echo-local's debug page says of its caller
	caller.Store(clientPodIP)
	answers := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/debug") {
			fmt.Fprintf(w, "Φορτίο version 1.75.3 echo debug server on echo-local - request from %s:40000\n", caller.Load())
			return
		}
		by := "cluster-1"
		if strings.Contains(r.URL.Path, probe.EchoRemote+".") {
			by = "cluster-2"
		}
		w.Header().Set(install.ServedByHeader, by)
	}))
	env := func(t *testing.T, addr string) (*probeEnv, *[]string) {
		local, remote := probeClusters()
		var mu sync.Mutex
		var opened []string
		p := newProvider(t, false)
		e := &probeEnv{p: p, api: answers, setup: probe.Setup{Local: local, Remote: remote, Clusters: []*cluster.Cluster{local, remote}}}
		e.adminDump = func(_ context.Context, c *cluster.Cluster, ns, pod string) (func(context.Context) ([]byte, error), func(), error) {
			mu.Lock()
			opened = append(opened, c.Name+" "+ns+"/"+pod)
			mu.Unlock()
			return func(ctx context.Context) ([]byte, error) { return fetchConfigDump(ctx, addr) }, func() {}, nil
		}
		return e, &opened
	}

	t.Run("ReturnsOnceTheRemoteEndpointsAreHeld", func(t *testing.T) {
		addr, reads := dumpServer(t, beforeFailoverConverged(t), converged(t), 2)
		e, opened := env(t, addr)
		require.NoError(t, e.Ready(context.Background(), 30*time.Second))
		assert.Equal(t, []string{"cluster-1 istio-system/ztunnel-b"}, *opened, "the ztunnel on the client's node")
		assert.Equal(t, int32(3), reads.Load())
	})
	t.Run("FailsWhenTheApplicationDoesNotSeeTheClient", func(t *testing.T) {
		caller.Store("10.11.0.9") // the echo pod's own address: a ztunnel without the original source
		defer caller.Store(clientPodIP)
		addr, _ := dumpServer(t, beforeFailoverConverged(t), converged(t), 2)
		e, _ := env(t, addr)
		err := e.Ready(context.Background(), 3*time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "echo-local saw its caller as 10.11.0.9, want the client pod's 10.11.0.10")
	})
	t.Run("FailsWhenOnlyTheLocalEndpointIsHeld", func(t *testing.T) {
		addr, _ := dumpServer(t, beforeFailoverConverged(t), nil, 1<<30)
		e, _ := env(t, addr)
		err := e.Ready(context.Background(), 3*time.Second)
		require.Error(t, err, "echo-failover answered, but the client's ztunnel cannot fail over")
		assert.Contains(t, err.Error(), "ztunnel istio-system/ztunnel-b (the client's, in cluster-1) never held what Ready promises")
		assert.Contains(t, err.Error(), "echo-failover: no Healthy endpoint of cluster cluster-2 on network network-2 (endpoints network-1/cluster-1 Healthy)")
	})
}
