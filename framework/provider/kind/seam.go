package kind

import (
	"fmt"
	"io"
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
