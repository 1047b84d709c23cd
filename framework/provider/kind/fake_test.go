package kind

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/images"
)

// The fakes below stand in for Docker only: kind's provider (fakeKind) and the docker CLI
// (fakeDocker). The API servers the created clusters answer with are real HTTP servers on
// loopback serving /version, so the framework's own client code runs unchanged.

// fakeKind records what the provider asks of kind.
type fakeKind struct {
	t      *testing.T
	server *httptest.Server
	delay  time.Duration
	// failCreate makes Create of these kind names fail.
	failCreate map[string]bool
	// internalNetwork: Create ends as kind's does on an internal network (its kubeconfig export fails).
	internalNetwork bool
	// stuck makes Delete of these kind names fail as a node with a frozen cgroup does, until
	// freezer.state under thawed reads THAWED.
	stuck    map[string]bool
	thawed   string
	existing []string
	// hold, when set, keeps every Create running until it is closed; the create then fails as
	// kind's does once its node container was removed, its cluster still listed (a container
	// that a docker run in flight made).
	hold chan struct{}
	// deleteDelay is how long each Delete takes.
	deleteDelay time.Duration

	mu                sync.Mutex
	running, maxSeen  int
	clusters          map[string]*v1alpha4.Cluster // alive
	creates           []string
	deletes           []string
	deleteKubeconfigs []string
	logs              []string
	nodes             map[string]*fakeNode
	// notReady: reads of a node (by name) that report it NotReady before Ready; -1 for ever.
	notReady  map[string]int
	nodeReads int
}

func newFakeKind(t *testing.T) *fakeKind {
	k := &fakeKind{t: t, clusters: map[string]*v1alpha4.Cluster{}, nodes: map[string]*fakeNode{}, failCreate: map[string]bool{}, notReady: map[string]int{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/version":
			fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.0"}`)
		case strings.HasPrefix(r.URL.Path, "/api/v1/nodes/"):
			k.serveNode(w, strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/"))
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	k.server = srv
	return k
}

// serveNode answers GET /api/v1/nodes/<name> as the cluster's API server would: Ready once the
// kubelet posted it, which notReady delays by that many reads (-1: never).
func (k *fakeKind) serveNode(w http.ResponseWriter, name string) {
	k.mu.Lock()
	left := k.notReady[name]
	if left > 0 {
		k.notReady[name] = left - 1
	}
	k.nodeReads++
	k.mu.Unlock()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if left != 0 {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}
	}
	node := corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
			ready,
		}},
	}
	_ = json.NewEncoder(w).Encode(node)
}

func (k *fakeKind) Create(name string, cfg *v1alpha4.Cluster, kubeconfig string, _ time.Duration) error {
	k.mu.Lock()
	k.running++
	k.maxSeen = max(k.maxSeen, k.running)
	k.creates = append(k.creates, name)
	k.mu.Unlock()
	time.Sleep(k.delay)
	if k.hold != nil {
		<-k.hold
		k.mu.Lock()
		defer k.mu.Unlock()
		k.running--
		k.clusters[name] = cfg
		return fmt.Errorf("command \"docker exec --privileged %s-control-plane kubeadm init\" failed with error: exit status 137", name)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running--
	if k.failCreate[name] {
		return fmt.Errorf("failed to init node with kubeadm")
	}
	if _, ok := k.clusters[name]; ok {
		return fmt.Errorf("node(s) already exist for a cluster with the name %q", name)
	}
	if kubeconfig == "" {
		k.t.Errorf("%s: created without a kubeconfig path: kind would write the user's ~/.kube/config", name)
	}
	// kind writes its kubeconfig with its own mode; the provider must make it private.
	if err := os.WriteFile(kubeconfig, []byte("written by kind\n"), 0o644); err != nil {
		return err
	}
	k.clusters[name] = cfg
	k.nodes[name] = &fakeNode{name: name + "-control-plane", ip: "127.0.0.1"} // the fake API server's address: Create reaches clusters at their node IP
	if k.internalNetwork {
		// kind's last step on an internal network, with the cluster up (kubeconfig.Export).
		return fmt.Errorf("failed to get api server port: command \"docker inspect ...\" failed with error: exit status 1")
	}
	return nil
}

func (k *fakeKind) Delete(name, kubeconfig string) error {
	time.Sleep(k.deleteDelay)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.deletes = append(k.deletes, name)
	if k.stuck[name] {
		if b, err := os.ReadFile(filepath.Join(k.thawed, "freezer.state")); err != nil || string(b) != "THAWED" {
			return fmt.Errorf("failed to delete nodes: command \"docker rm -f -v %s-control-plane\" failed with error: exit status 1", name)
		}
	}
	k.deleteKubeconfigs = append(k.deleteKubeconfigs, kubeconfig)
	delete(k.clusters, name)
	return nil
}

func (k *fakeKind) List() ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := append([]string(nil), k.existing...)
	for n := range k.clusters {
		out = append(out, n)
	}
	return out, nil
}

func (k *fakeKind) KubeConfig(name string, internal bool) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.clusters[name]; !ok {
		return "", fmt.Errorf("unknown cluster %q", name)
	}
	server := k.server.URL
	if internal {
		server = "https://" + name + "-control-plane:" + k.server.URL[strings.LastIndexByte(k.server.URL, ':')+1:]
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kind-%[1]s
  cluster:
    server: %[2]s
    insecure-skip-tls-verify: true
contexts:
- name: kind-%[1]s
  context: {cluster: kind-%[1]s, user: kind-%[1]s}
current-context: kind-%[1]s
users:
- name: kind-%[1]s
  user: {token: secret-%[1]s}
`, name, server), nil
}

func (k *fakeKind) ListInternalNodes(name string) ([]nodes.Node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, ok := k.nodes[name]
	if !ok {
		return nil, fmt.Errorf("unknown cluster %q", name)
	}
	return []nodes.Node{n}, nil
}

func (k *fakeKind) CollectLogs(name, dir string) error {
	k.mu.Lock()
	k.logs = append(k.logs, name)
	k.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	k.mu.Lock()
	n := k.nodes[name]
	k.mu.Unlock()
	if n != nil {
		// What kind writes per node (journalctl -u kubelet.service into <node>/kubelet.log).
		nodeDir := filepath.Join(dir, n.name)
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return err
		}
		var journal strings.Builder
		for i := range 30 {
			fmt.Fprintf(&journal, "Dec 01 18:00:%02d %s kubelet[312]: E1201 kubelet.go:3117] \"Container runtime network not ready\" networkReady=\"NetworkReady=false reason:NetworkPluginNotReady\" line=%d\n", i, n.name, i)
		}
		if err := os.WriteFile(filepath.Join(nodeDir, "kubelet.log"), []byte(journal.String()), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "kind-version.txt"), []byte("fake\n"), 0o644)
}

func (k *fakeKind) alive() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.clusters)
}

// fakeNode is a kind node container; it answers the commands LoadImageArchive runs.
type fakeNode struct {
	name, ip string
	mu       sync.Mutex
	imported [][]byte
	// mirrors are the registry mirror scripts the node ran (localregistry.MirrorScript).
	mirrors []string
}

func (n *fakeNode) String() string              { return n.name }
func (n *fakeNode) Role() (string, error)       { return "control-plane", nil }
func (n *fakeNode) IP() (string, string, error) { return n.ip, "fc00:f853:ccd:e793::2", nil }
func (n *fakeNode) SerialLogs(io.Writer) error  { return nil }
func (n *fakeNode) Command(cmd string, args ...string) kindexec.Cmd {
	return &fakeCmd{node: n, argv: append([]string{cmd}, args...)}
}
func (n *fakeNode) CommandContext(_ context.Context, cmd string, args ...string) kindexec.Cmd {
	return n.Command(cmd, args...)
}

type fakeCmd struct {
	node   *fakeNode
	argv   []string
	stdin  io.Reader
	stdout io.Writer
}

func (c *fakeCmd) Run() error {
	if len(c.argv) == 3 && c.argv[0] == "sh" && strings.Contains(c.argv[2], "/etc/containerd/certs.d/") {
		c.node.mu.Lock()
		c.node.mirrors = append(c.node.mirrors, c.argv[2])
		c.node.mu.Unlock()
		return nil
	}
	switch strings.Join(c.argv[:min(3, len(c.argv))], " ") {
	case "containerd config dump":
		_, err := io.WriteString(c.stdout, "version = 3\n[plugins]\n  [plugins.'io.containerd.cri.v1.images']\n    snapshotter = 'overlayfs'\n")
		return err
	case "ctr --namespace=k8s.io images":
		data, err := io.ReadAll(c.stdin)
		if err != nil {
			return err
		}
		c.node.mu.Lock()
		c.node.imported = append(c.node.imported, data)
		c.node.mu.Unlock()
		return nil
	}
	return fmt.Errorf("fake node: unexpected command %q", c.argv)
}
func (c *fakeCmd) SetEnv(...string) kindexec.Cmd      { return c }
func (c *fakeCmd) SetStdin(r io.Reader) kindexec.Cmd  { c.stdin = r; return c }
func (c *fakeCmd) SetStdout(w io.Writer) kindexec.Cmd { c.stdout = w; return c }
func (c *fakeCmd) SetStderr(io.Writer) kindexec.Cmd   { return c }

// fakeDocker answers as a docker CLI would.
type fakeDocker struct {
	versionErr error
	present    bool
	// stored answers ImagePresent for the images it names (else present); saved are the
	// SaveImages calls, each the images it wrote.
	stored map[string]bool
	saved  [][]string
	// started are the registries RunContainer started (registries counts them).
	started    []*http.Server
	registries int
	label      string
	network    dockerhost.Network
	// ipam is the subnet Docker's IPAM gives a network CreateNetwork creates.
	ipam     dockerhost.Network
	created  []string
	internal []string // networks created --internal
	removed  []string
	// containers are each kind cluster's container IDs; removedContainers those RemoveContainers
	// removed, in rmCalls calls; stuck: see RemoveContainers.
	containers        map[string][]string
	removedContainers []string
	rmCalls           int
	stuck             map[string]string
	// onRemove runs after containers were removed; beforeNetworkRemove before a network is.
	onRemove            func(ids []string)
	beforeNetworkRemove func(name string)
	// mu guards containers and what RemoveContainers records, which a test may change meanwhile.
	mu sync.Mutex
}

// addContainers gives kind cluster name containers ids, as a docker run does.
func (d *fakeDocker) addContainers(name string, ids ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.containers == nil {
		d.containers = map[string][]string{}
	}
	d.containers[name] = append(d.containers[name], ids...)
}

func (d *fakeDocker) removedIDs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.removedContainers)
}

func (d *fakeDocker) ServerVersion(context.Context) (string, error) {
	if d.versionErr != nil {
		return "", d.versionErr
	}
	return "28.1.1", nil
}
func (d *fakeDocker) ImagePresent(_ context.Context, image string) (bool, error) {
	if v, ok := d.stored[image]; ok {
		return v, nil
	}
	return d.present, nil
}

// RunContainer starts a registry as make images builds it would answer: go-containerregistry's
// in-memory registry (a fake: no container runs here) on a loopback address of its own, port 5000.
func (d *fakeDocker) RunContainer(_ context.Context, name, image, network string, labels map[string]string) (netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.registries++
	a := netip.AddrFrom4([4]byte{127, 77, byte(os.Getpid()), byte(d.registries)})
	l, err := net.Listen("tcp", netip.AddrPortFrom(a, images.RegistryPort).String())
	if err != nil {
		return netip.Addr{}, err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go func() { _ = srv.Serve(l) }()
	d.started = append(d.started, srv)
	return a, nil
}

func (d *fakeDocker) SaveImages(_ context.Context, path string, images ...string) error {
	d.mu.Lock()
	d.saved = append(d.saved, images)
	d.mu.Unlock()
	// A docker archive of one small image under every name, as docker image save writes it.
	img, err := random.Image(256, 1)
	if err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, ref := range images {
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		refs[tag] = img
	}
	return tarball.MultiRefWriteToFile(path, refs)
}
func (d *fakeDocker) ImageLabel(context.Context, string, string) (string, error) {
	return d.label, nil
}
func (d *fakeDocker) Network(context.Context, string) (dockerhost.Network, error) {
	if !d.network.Subnet.IsValid() {
		return dockerhost.Network{}, dockerhost.ErrNoNetwork
	}
	return d.network, nil
}
func (d *fakeDocker) CreateNetwork(_ context.Context, name string, subnet netip.Prefix, internal bool) error {
	d.created = append(d.created, name)
	d.network = d.ipam
	if internal {
		d.network = dockerhost.Network{Subnet: subnet}
		d.internal = append(d.internal, name)
	}
	return nil
}
func (d *fakeDocker) Subnets(context.Context) ([]netip.Prefix, error) {
	if d.network.Subnet.IsValid() {
		return []netip.Prefix{d.network.Subnet}, nil
	}
	return nil, nil
}
func (d *fakeDocker) LabelledContainers(_ context.Context, label string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.containers[strings.TrimPrefix(label, kindClusterLabel+"=")]), nil
}

// RemoveContainers fails while one of the containers is stuck (freezer.state in its stuck
// directory is not THAWED), as `docker rm -f` does on a node with a frozen cgroup.
func (d *fakeDocker) RemoveContainers(_ context.Context, ids []string) error {
	err := d.removeContainers(ids)
	if err == nil && d.onRemove != nil {
		d.onRemove(ids)
	}
	return err
}

func (d *fakeDocker) removeContainers(ids []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rmCalls++
	for _, id := range ids {
		if dir, ok := d.stuck[id]; ok {
			if b, err := os.ReadFile(filepath.Join(dir, "freezer.state")); err != nil || string(b) != "THAWED" {
				return fmt.Errorf("tried to kill container %s, but did not receive an exit event", id)
			}
		}
	}
	d.removedContainers = append(d.removedContainers, ids...)
	for name, have := range d.containers { // removed containers are gone
		d.containers[name] = slices.DeleteFunc(have, func(id string) bool { return slices.Contains(ids, id) })
	}
	return nil
}

func (d *fakeDocker) RemoveNetwork(_ context.Context, name string) error {
	if d.beforeNetworkRemove != nil {
		d.beforeNetworkRemove(name)
	}
	d.removed = append(d.removed, name)
	return nil
}

// lbRecorder stands in for the MetalLB install, which needs a cluster that runs pods.
type lbRecorder struct {
	mu    sync.Mutex
	pools map[string]netip.Prefix
}

func (l *lbRecorder) install(_ context.Context, c *cluster.Cluster, pool netip.Prefix) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pools == nil {
		l.pools = map[string]netip.Prefix{}
	}
	l.pools[c.Name] = pool
	return nil
}
