package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/kubeconfig"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/topology"
)

// controllers are the kube-controller-manager controllers every local cluster runs: those a kind
// cluster runs that act on API objects alone. docs/providers.md lists the ones left out and why; in
// short: no API group to act on (batch, certificates, storage, resource and scheduling are off in
// the API server, see disabledGroups), nothing to act on (no volumes, quotas, metrics, cloud or
// bootstrap tokens), or alpha.
var controllers = []string{
	"serviceaccount-token-controller",
	"serviceaccount-controller",
	"legacy-serviceaccount-token-cleaner-controller",
	"root-ca-certificate-publisher-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"namespace-controller",
	"garbage-collector-controller",
	"pod-garbage-collector-controller",
	"ttl-controller",
	"node-ipam-controller",
	"node-lifecycle-controller",
	"taint-eviction-controller",
	"deployment-controller",
	"replicaset-controller",
	"replicationcontroller-controller",
	"daemonset-controller",
	"statefulset-controller",
	"disruption-controller",
	"clusterrole-aggregation-controller",
	"validatingadmissionpolicy-status-controller",
	"service-cidr-controller",
}

// controllerManagerUser is the identity kubeadm gives kube-controller-manager; the API server's
// bootstrap RBAC binds it to system:kube-controller-manager, which may mint the per-controller
// service-account tokens --use-service-account-credentials asks for.
const controllerManagerUser = "system:kube-controller-manager"

// startControllerManager starts kube-controller-manager against the API server at server and
// waits until it serves /healthz. Each controller runs as its own service account, as on kind.
func (m *member) startControllerManager(ctx context.Context, server string, caData []byte, token string) error {
	kc := filepath.Join(m.dir, "kube-controller-manager.kubeconfig")
	if err := kubeconfig.WriteFile(kc, kubeconfig.Token(m.topo.Name, server, caData, token)); err != nil {
		return err
	}
	pods, err := topology.PodCIDR(m.topo.Index)
	if err != nil {
		return err
	}
	svcs, err := topology.ServiceCIDR(m.topo.Index)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err = m.tryControllerManager(ctx, kc, pods.String(), svcs.String())
		if err == nil {
			return nil
		}
		collided := m.kcmPortCollision()
		m.stopControllerManager()
		if !collided || attempt == portAttempts || ctx.Err() != nil {
			return err
		}
	}
}

func (m *member) tryControllerManager(ctx context.Context, kc, podCIDR, svcCIDR string) error {
	ports, err := proc.FreePorts(1)
	if err != nil {
		return err
	}
	p, err := m.launch(proc.Spec{
		Name: m.topo.Name + "/kube-controller-manager",
		Path: m.paths[bins.KubeControllerManager],
		Args: append([]string{
			"--kubeconfig=" + kc,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + filepath.Join(m.dir, "kube-controller-manager-pki"),
			"--controllers=" + strings.Join(controllersFor(m.watchedOnly), ","),
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + filepath.Join(m.dir, "sa.key"),
			// What pods verify the API server with: its self-signed serving certificate.
			"--root-ca-file=" + filepath.Join(m.dir, "pki", "apiserver.crt"),
			"--allocate-node-cidrs=true",
			"--cluster-cidr=" + podCIDR,
			"--service-cluster-ip-range=" + svcCIDR,
			// One instance per cluster: electing a leader would only add a lease write every 2 s.
			"--leader-elect=false",
			// The fake nodes' leases are renewed by the framework every 10 s from a host that may be
			// saturated: at 50 clusters a renewal came later than the default 50 s grace, node
			// lifecycle marked the node's pods not ready, and no kubelet was there to set them
			// Ready again. A node still goes NotReady when the framework stops renewing it.
			"--node-monitor-grace-period=" + m.nodeMonitorGrace().String(),
			"--profiling=false",
		}, m.kcmArgs...),
		LogFile: filepath.Join(m.dir, "kube-controller-manager.log"),
		Env:     withProcs(kcmGCEnv(), m.watchedOnly),
	}, &m.kcm)
	if err != nil {
		return err
	}
	return m.waitReady(ctx, p, proc.HTTPProbe(fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]), ""))
}

// endpointBatchPeriod batches the endpoint controllers' writes at scale: with none, each pod's
// status write costs an EndpointSlice and an Endpoints write of its whole service, which a cluster
// loaded in bulk does not need (large clusters set the same flags). The objects in the end are the
// same; docs/measurements.md#the-published-experiment has what it saves.
const endpointBatchPeriod = 2 * time.Second

// endpointBatching is the controller-manager's batching for clusters of that many pods: from
// memoryBoundPods (published scale), none below, where every write's latency is kept as is.
func endpointBatching(pods int) []string {
	if pods < memoryBoundPods {
		return nil
	}
	p := endpointBatchPeriod.String()
	return []string{"--endpoint-updates-batch-period=" + p, "--endpointslice-updates-batch-period=" + p}
}

// nodeMonitorGrace is how long node lifecycle waits for a fake node's lease before it calls the
// node NotReady: twenty renewals' worth (nodeLeaseRenewal).
const nodeMonitorGrace = 20 * nodeLeaseRenewal

func (m *member) nodeMonitorGrace() time.Duration {
	if m.nodeGrace > 0 {
		return m.nodeGrace
	}
	return nodeMonitorGrace
}

// kcmGCEnv keeps the controller-manager's heap at 1.5 times its live size rather than twice:
// with 4000 pods in one cluster (2 cores) its RSS is 151 MB instead of 173 MB, of which 75 MB are
// the binary's pages, shared by every controller-manager; its CPU does not change measurably.
func kcmGCEnv() []string { return []string{"GOGC=50"} }

func (m *member) kcmPortCollision() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kcm != nil && m.kcm.LogContains("address already in use")
}

func (m *member) stopControllerManager() { proc.StopSlot(&m.mu, &m.kcm, stopGrace) }

// tokenLines are the API server's static token file: the framework's admin and, when it runs,
// kube-controller-manager.
func tokenLines(admin, kcm string) []byte {
	lines := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", admin, adminUser, adminUser)
	if kcm != "" {
		lines += fmt.Sprintf("%s,%s,%s\n", kcm, controllerManagerUser, controllerManagerUser)
	}
	return []byte(lines)
}

// writeTokens writes the token file (0600).
func (m *member) writeTokens(admin, kcm string) error {
	return os.WriteFile(filepath.Join(m.dir, "tokens.csv"), tokenLines(admin, kcm), 0o600)
}
