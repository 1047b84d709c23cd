package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// kind drives Docker by running the docker CLI; it has no in-process seam to fake. The framework
// therefore talks to kind and Docker only through the two interfaces below: the real ones wrap
// kind's *cluster.Provider and the docker CLI, tests fake them.

// Kind is the part of kind's *cluster.Provider the framework uses.
type Kind interface {
	// Create creates cluster name from cfg, writes its kubeconfig to kubeconfig (never the user's
	// ~/.kube/config) and waits up to wait for the control plane to be Ready. A failed create
	// leaves its nodes for CollectLogs; Delete removes them.
	Create(name string, cfg *v1alpha4.Cluster, kubeconfig string, wait time.Duration) error
	// Delete deletes cluster name and its entry in kubeconfig.
	Delete(name, kubeconfig string) error
	// List returns the names of every kind cluster on the host.
	List() ([]string, error)
	// KubeConfig returns the cluster's kubeconfig: for the host (internal=false) or for other
	// containers on the kind network (internal=true).
	KubeConfig(name string, internal bool) (string, error)
	// ListInternalNodes returns the cluster's Kubernetes nodes (not its load balancer).
	ListInternalNodes(name string) ([]nodes.Node, error)
	// CollectLogs writes the cluster's logs (nodes, containers, journal) under dir.
	CollectLogs(name, dir string) error
}

// Docker is what the provider asks the docker CLI directly.
type Docker interface {
	// ServerVersion returns the Docker daemon's version, or why it cannot be reached.
	ServerVersion(ctx context.Context) (string, error)
	// ImagePresent reports whether image is in the local image store.
	ImagePresent(ctx context.Context, image string) (bool, error)
	// ImageLabel returns one label of a local image ("" when it has none).
	ImageLabel(ctx context.Context, image, label string) (string, error)
	// Network returns the IPv4 addressing of a docker network; ErrNoNetwork if it does not exist.
	Network(ctx context.Context, name string) (Network, error)
	// Subnets lists the IPv4 subnets of every docker network.
	Subnets(ctx context.Context) ([]netip.Prefix, error)
	// CreateNetwork creates docker network name: with a subnet and internal, the run's network
	// (runnet.go); without, as kind's first create would (network.go).
	CreateNetwork(ctx context.Context, name string, subnet netip.Prefix, internal bool) error
	// RemoveNetwork removes docker network name.
	RemoveNetwork(ctx context.Context, name string) error
	// ClusterContainers returns the full IDs of kind cluster name's containers.
	ClusterContainers(ctx context.Context, name string) ([]string, error)
	// RemoveContainers force-removes containers ids with their anonymous volumes.
	RemoveContainers(ctx context.Context, ids []string) error
}

// Network is a docker network's IPv4 addressing.
type Network struct {
	Subnet netip.Prefix
	// IPRange is where docker allocates container addresses, when narrower than Subnet.
	IPRange netip.Prefix
}

// ErrNoNetwork is returned by Docker.Network for a network that does not exist.
var ErrNoNetwork = errors.New("no such docker network")

// ErrNoDockerCLI is returned when the docker CLI is not on PATH.
var ErrNoDockerCLI = errors.New("the docker CLI is not on PATH")

// NewKind returns kind's own docker-backed provider behind the Kind interface; kind's messages go
// to log, one line each, prefixed with the cluster's name.
func NewKind(log io.Writer) Kind { return &realKind{log: log} }

type realKind struct{ log io.Writer }

func (k *realKind) provider(name string) *kindcluster.Provider {
	return kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(&lineLogger{w: k.log, prefix: "ambientmc: kind: " + name + ": "}))
}

func (k *realKind) Create(name string, cfg *v1alpha4.Cluster, kubeconfig string, wait time.Duration) error {
	return withCommandOutput(k.provider(name).Create(name,
		// kind mutates the struct it is given (SetDefaultsCluster): hand it a copy.
		kindcluster.CreateWithV1Alpha4Config(cfg.DeepCopy()),
		kindcluster.CreateWithKubeconfigPath(kubeconfig),
		kindcluster.CreateWithWaitForReady(wait),
		// Keep a failed cluster's nodes so CollectLogs can read them; Destroy deletes them.
		kindcluster.CreateWithRetain(true),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false)))
}

// withCommandOutput adds to err the last lines a failed node command (kubeadm init, say) printed:
// kind keeps them in its error but does not show them.
func withCommandOutput(err error) error {
	run := kindexec.RunErrorForError(err)
	if run == nil || len(run.Output) == 0 {
		return err
	}
	lines := withoutStackFrames(strings.Split(strings.TrimRight(string(run.Output), "\n"), "\n"))
	return fmt.Errorf("%w; its last output:\n%s", err, strings.Join(lines[max(0, len(lines)-30):], "\n"))
}

// withoutStackFrames drops the Go stack trace kubeadm prints after its error (a function's line,
// then its tab-indented file:line), which would otherwise fill the lines kept and push the error
// message out of them.
func withoutStackFrames(lines []string) []string {
	var kept []string
	for _, l := range lines {
		if strings.HasPrefix(l, "\t/") {
			if len(kept) > 0 {
				kept = kept[:len(kept)-1]
			}
			continue
		}
		kept = append(kept, l)
	}
	return kept
}

func (k *realKind) Delete(name, kubeconfig string) error {
	return k.provider(name).Delete(name, kubeconfig)
}
func (k *realKind) List() ([]string, error) { return k.provider("list").List() }
func (k *realKind) KubeConfig(name string, internal bool) (string, error) {
	return k.provider(name).KubeConfig(name, internal)
}
func (k *realKind) ListInternalNodes(name string) ([]nodes.Node, error) {
	return k.provider(name).ListInternalNodes(name)
}
func (k *realKind) CollectLogs(name, dir string) error {
	return k.provider(name).CollectLogs(name, dir)
}

// lineLogger is a kind logger that writes user-facing messages (V(0), warnings, errors) as lines.
type lineLogger struct {
	w      io.Writer
	prefix string
}

func (l *lineLogger) line(s string) {
	if s = strings.TrimRight(s, "\n"); s != "" {
		fmt.Fprintln(l.w, l.prefix+s)
	}
}
func (l *lineLogger) Warn(m string)                        { l.line(m) }
func (l *lineLogger) Warnf(f string, a ...any)             { l.line(fmt.Sprintf(f, a...)) }
func (l *lineLogger) Error(m string)                       { l.line(m) }
func (l *lineLogger) Errorf(f string, a ...any)            { l.line(fmt.Sprintf(f, a...)) }
func (l *lineLogger) V(v kindlog.Level) kindlog.InfoLogger { return infoLogger{l, v == 0} }

type infoLogger struct {
	l  *lineLogger
	on bool
}

func (i infoLogger) Info(m string) {
	if i.on {
		i.l.line(m)
	}
}
func (i infoLogger) Infof(f string, a ...any) {
	if i.on {
		i.l.line(fmt.Sprintf(f, a...))
	}
}
func (i infoLogger) Enabled() bool { return i.on }

// NewDocker returns the docker CLI behind the Docker interface.
func NewDocker() Docker { return dockerCLI{} }

type dockerCLI struct{}

func (dockerCLI) run(ctx context.Context, args ...string) ([]byte, error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return nil, ErrNoDockerCLI
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg == "" {
			msg = err.Error()
		}
		return nil, errors.New(msg)
	}
	return stdout.Bytes(), nil
}

func (d dockerCLI) ServerVersion(ctx context.Context) (string, error) {
	out, err := d.run(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func (d dockerCLI) ImagePresent(ctx context.Context, image string) (bool, error) {
	if _, err := d.run(ctx, "image", "inspect", "--format", "{{.Id}}", image); err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "no such image") {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (d dockerCLI) ImageLabel(ctx context.Context, image, label string) (string, error) {
	out, err := d.run(ctx, "image", "inspect", "--format", "{{index .Config.Labels \""+label+"\"}}", image)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(out))
	if v == "<no value>" {
		v = ""
	}
	return v, nil
}

func (d dockerCLI) Subnets(ctx context.Context) ([]netip.Prefix, error) {
	ids, err := d.run(ctx, "network", "ls", "-q")
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, id := range strings.Fields(string(ids)) {
		data, err := d.run(ctx, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", id)
		if err != nil {
			continue // removed meanwhile
		}
		for _, s := range strings.Fields(string(data)) {
			if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
				out = append(out, p.Masked())
			}
		}
	}
	return out, nil
}

func (d dockerCLI) ClusterContainers(ctx context.Context, name string) ([]string, error) {
	out, err := d.run(ctx, "ps", "-aq", "--no-trunc", "--filter", "label=io.x-k8s.kind.cluster="+name)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

func (d dockerCLI) RemoveContainers(ctx context.Context, ids []string) error {
	_, err := d.run(ctx, append([]string{"rm", "-f", "-v"}, ids...)...)
	return err
}

func (d dockerCLI) RemoveNetwork(ctx context.Context, name string) error {
	_, err := d.run(ctx, "network", "rm", name)
	return err
}

func (d dockerCLI) Network(ctx context.Context, name string) (Network, error) {
	out, err := d.run(ctx, "network", "inspect", name)
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "not found") || strings.Contains(strings.ToLower(err.Error()), "no such network") {
			return Network{}, ErrNoNetwork
		}
		return Network{}, err
	}
	return parseNetworkInspect(out)
}

// parseNetworkInspect reads the IPv4 IPAM config of `docker network inspect` output.
func parseNetworkInspect(out []byte) (Network, error) {
	var nets []struct {
		Name string
		IPAM struct {
			Config []struct{ Subnet, IPRange string }
		}
	}
	if err := json.Unmarshal(out, &nets); err != nil {
		return Network{}, fmt.Errorf("docker network inspect: %w", err)
	}
	if len(nets) != 1 {
		return Network{}, fmt.Errorf("docker network inspect: want one network, got %d", len(nets))
	}
	for _, c := range nets[0].IPAM.Config {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		n := Network{Subnet: p.Masked()}
		if c.IPRange != "" {
			if r, err := netip.ParsePrefix(c.IPRange); err == nil {
				n.IPRange = r.Masked()
			}
		}
		return n, nil
	}
	return Network{}, fmt.Errorf("docker network %s has no IPv4 subnet", nets[0].Name)
}
