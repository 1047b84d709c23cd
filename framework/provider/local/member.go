package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostetcd"
	"github.com/ambientmc/ambientmc/framework/kubeconfig"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/topology"
)

// member is one cluster of the local provider: a kube-apiserver on its prefix of the shared etcd
// and, unless turned off, its kube-controller-manager.
type member struct {
	topo    topology.Cluster
	dir     string
	paths   map[bins.Binary]string
	timeout time.Duration
	etcd    *hostetcd.Etcd
	// gcEnv tunes the API server's garbage collector (apiServerGC).
	gcEnv []string
	// controllers starts kube-controller-manager; egress is the socket of the proxy the API
	// server sends its pod, service and node proxy traffic through (framework/apiegress).
	controllers bool
	// watchedOnly: no istiod runs here and the run's istiod only watches it (watchedonly.go).
	watchedOnly bool
	nodeGrace   time.Duration // the controller-manager's node monitor grace (0: nodeMonitorGrace)
	kcmArgs     []string      // the controller-manager's flags for this run's scale (endpointBatching)
	egress      string

	mu        sync.Mutex
	apiserver *proc.Process
	kcm       *proc.Process
}

const (
	adminUser = "ambientmc-admin"
	// portAttempts bounds restarts after another process took a port between our pick and the bind.
	portAttempts = 3
	stopGrace    = 5 * time.Second
)

func (m *member) start(ctx context.Context) (*cluster.Cluster, error) {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, err
	}
	token, kcmToken, err := m.writeCredentials()
	if err != nil {
		return nil, err
	}
	var apiPort int
	for attempt := 1; ; attempt++ {
		apiPort, err = m.startProcesses(ctx, token)
		if err == nil {
			break
		}
		collided := m.portCollision()
		m.stop()
		if !collided || attempt == portAttempts || ctx.Err() != nil {
			return nil, err
		}
	}
	caData, err := os.ReadFile(filepath.Join(m.dir, "pki", "apiserver.crt"))
	if err != nil {
		return nil, fmt.Errorf("reading the API server's serving certificate: %w", err)
	}
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	kubeconfigPath := filepath.Join(m.dir, "kubeconfig")
	if err := kubeconfig.WriteFile(kubeconfigPath, kubeconfig.Token(m.topo.Name, server, caData, token)); err != nil {
		return nil, err
	}
	// Every cluster shares loopback, so other clusters' istiods reach this one at the same address.
	internal := filepath.Join(m.dir, "kubeconfig.internal")
	if err := kubeconfig.WriteFile(internal, kubeconfig.Token(m.topo.Name, server, caData, token)); err != nil {
		return nil, err
	}
	if m.controllers {
		if err := m.startControllerManager(ctx, server, caData, kcmToken); err != nil {
			return nil, err
		}
	}
	c, err := cluster.New(m.topo, kubeconfigPath, internal, &rest.Config{
		Host:            server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData},
	})
	if err != nil {
		return nil, err
	}
	if c.Addresses, err = addresses(m.topo.Index); err != nil {
		return nil, err
	}
	// No scheduler: nothing real lands on the fake nodes.
	c.Runs = cluster.Components{Controllers: m.controllers}
	return c, nil
}

// writeCredentials writes the token file (the admin's and, with controllers, the
// controller-manager's token) and the service-account signing key pair, which the API server
// (TokenRequest) and the controller-manager's token controller share. All of them are 0600.
func (m *member) writeCredentials() (admin, kcm string, err error) {
	if admin, err = randomToken(); err != nil {
		return "", "", err
	}
	if m.controllers {
		if kcm, err = randomToken(); err != nil {
			return "", "", err
		}
	}
	if err := m.writeTokens(admin, kcm); err != nil {
		return "", "", err
	}
	return admin, kcm, pki.WriteSigningKeyPair(filepath.Join(m.dir, "sa.key"), filepath.Join(m.dir, "sa.pub"))
}

func randomToken() (string, error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return hex.EncodeToString(raw), nil
}

// startProcesses starts kube-apiserver on a fresh loopback port, storing under this cluster's
// prefix of the shared etcd, and waits until it is ready. It returns the API server's port.
func (m *member) startProcesses(ctx context.Context, token string) (int, error) {
	ports, err := proc.FreePorts(1)
	if err != nil {
		return 0, err
	}
	svcRange, err := topology.ServiceCIDR(m.topo.Index)
	if err != nil {
		return 0, err
	}
	api, err := m.launch(proc.Spec{
		Name: m.topo.Name + "/kube-apiserver",
		Path: m.paths[bins.KubeAPIServer],
		Args: append([]string{
			"--etcd-servers=" + m.etcd.URL(),
			"--etcd-prefix=" + hostetcd.Prefix(m.topo.Name),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + filepath.Join(m.dir, "pki"),
			"--service-cluster-ip-range=" + svcRange.String(),
			"--authorization-mode=RBAC",
			"--token-auth-file=" + filepath.Join(m.dir, "tokens.csv"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + filepath.Join(m.dir, "sa.pub"),
			"--service-account-signing-key-file=" + filepath.Join(m.dir, "sa.key"),
			// istio-ca is the audience ztunnel and istiod use for their tokens.
			"--api-audiences=https://kubernetes.default.svc.cluster.local,istio-ca",
			"--allow-privileged=true",
			"--profiling=false",
			"--event-ttl=10m",
			// One framework client loads thousands of objects; priority and fairness would queue it.
			"--enable-priority-and-fairness=false",
			"--max-requests-inflight=1000",
			"--max-mutating-requests-inflight=500",
			// It cannot publish a loopback address in the kubernetes Endpoints, and retried every 10 s.
			"--endpoint-reconciler-type=none",
			// Pod, service and node proxy traffic goes through the framework's proxy (framework/apiegress).
			"--egress-selector-config-file=" + m.egress,
		}, apiServerScope(m.watchedOnly)...),
		LogFile: filepath.Join(m.dir, "kube-apiserver.log"),
		Env:     withProcs(m.gcEnv, m.watchedOnly),
	}, &m.apiserver)
	if err != nil {
		return 0, err
	}
	return ports[0], m.waitReady(ctx, api, proc.HTTPProbe(fmt.Sprintf("https://127.0.0.1:%d/readyz", ports[0]), token))
}

// apiServerGC returns the Go GC settings for a run of that many API servers, each to hold pods pods.
// Go's default lets a heap grow to twice its live size, which is fastest while memory lasts: so up
// to maxDefaultGCClusters the default runs; beyond, where memory is what runs out, GOGC=35 keeps
// the heap near the live one for some GC CPU, and from memoryBoundPods a soft limit above the live
// heap also returns what creating the workloads left behind (below that it sits too close to the
// live heap while the API server starts). The measurements behind each threshold:
// docs/measurements.md#why-the-settings-are-what-they-are.
func apiServerGC(clusters, pods int) []string {
	if defaultGC(clusters, pods) {
		return []string{"GOGC=100"} // explicit: a GOGC the test process runs with does not leak in
	}
	env := []string{"GOGC=35"}
	if pods >= memoryBoundPods {
		env = append(env, fmt.Sprintf("GOMEMLIMIT=%dMiB", 120+pods*45/1024))
	}
	return env
}

// apiServerEnv is the API servers' GC settings for a run of that many clusters: APIServerGOGC
// when set, else roomyGOGC where preflight found the memory for it (roomy), else apiServerGC's
// choice.
func (o Options) apiServerEnv(clusters int, roomy bool) []string {
	switch {
	case o.APIServerGOGC > 0:
		return []string{"GOGC=" + strconv.Itoa(o.APIServerGOGC)}
	case roomy:
		return []string{"GOGC=" + strconv.Itoa(roomyGOGC)}
	}
	return apiServerGC(clusters, o.PodsPerCluster)
}

// memoryBoundPods is the pods per cluster from which memory rules the API servers' GC: no default
// GC, and a soft memory limit (apiServerGC).
const memoryBoundPods = 2000

// maxDefaultGCClusters is the most clusters whose API servers run Go's default GC: 20 such
// clusters take about 1.6 GB more than at GOGC=35.
const maxDefaultGCClusters = 20

// defaultGC reports whether API servers run with Go's default GC (apiServerGC).
func defaultGC(clusters, pods int) bool {
	return clusters <= maxDefaultGCClusters && pods < memoryBoundPods
}

// disabledGroups are built-in API groups that neither istiod (its kube registry, ambient index,
// gateway deployment controller with HPAs and PDBs, leader election, CRD watcher) nor the framework
// uses; TestSlimAPIServerServesWhatIstiodUses lists everything they do use. Off, they cut API
// server memory by about 7% (measured: 472 -> 438 MB RSS with the CRDs, 2 clusters).
var disabledGroups = []string{
	"batch", "certificates.k8s.io", "events.k8s.io", "flowcontrol.apiserver.k8s.io", "node.k8s.io",
	"resource.k8s.io", "scheduling.k8s.io", "storage.k8s.io",
}

// disabledAdmission are the admission plugins that serve those groups (they fail to sync without
// them, and the API server never becomes ready) and those with nothing to do here: no quotas, limit
// ranges or pod-security labels exist. Of what istiod reads, only spec.priority (set by Priority)
// changes: it is left unset, and istiod does not read it.
var disabledAdmission = []string{
	"CertificateApproval", "CertificateSigning", "CertificateSubjectRestriction", "ClusterTrustBundleAttest",
	"DefaultStorageClass", "PersistentVolumeClaimResize", "StorageObjectInUseProtection", "RuntimeClass", "Priority",
	"LimitRanger", "PodSecurity", "ResourceQuota",
}

func (m *member) launch(spec proc.Spec, slot **proc.Process) (*proc.Process, error) {
	p, err := proc.Start(spec)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.Name, err)
	}
	m.mu.Lock()
	*slot = p
	m.mu.Unlock()
	return p, nil
}

func (m *member) waitReady(ctx context.Context, p *proc.Process, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return p.WaitReady(ctx, 100*time.Millisecond, probe)
}

func (m *member) portCollision() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.apiserver != nil && m.apiserver.LogContains("address already in use")
}

// stop stops the controller-manager, then the API server (the shared etcd is stopped after every
// API server).
func (m *member) stop() {
	m.stopControllerManager()
	proc.StopSlot(&m.mu, &m.apiserver, stopGrace)
}
