package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
)

// istiod's ports inside its pod.
const (
	istiodMetricsPort = 15014
	istiodCtrlzPort   = 9876 // ControlZ binds localhost in the pod: only a port-forward reaches it
	istiodXDSPort     = 15012
)

// controlPlaneComponents are what StartIstiod applies; the east-west gateway follows in
// EastWestGateway, the probes in DeployProbes.
var controlPlaneComponents = []string{
	install.ComponentGatewayAPICRDs, install.ComponentBase, install.ComponentIstiod, install.ComponentCNI, install.ComponentZtunnel,
}

// StartIstiod installs Istio ambient into primary c (the Gateway API CRDs, base with the
// cluster's cacerts, istiod, istio-cni, ztunnel, each waited for), then reaches the istiod pod
// through port-forwards. Only the cluster's own istiod is supported: a second one on a real
// cluster (o.Name != "") returns cluster.ErrUnsupported.
func (p *Provider) StartIstiod(ctx context.Context, c *cluster.Cluster, o cluster.IstiodOptions) (cluster.Istiod, error) {
	if o.Name != "" {
		return nil, cluster.ErrUnsupported
	}
	if o.CA == nil {
		return nil, fmt.Errorf("istiod %s: no CA given", c.Name)
	}
	m, err := p.member(c.Name)
	if err != nil {
		return nil, err
	}
	if m.istiod != nil {
		return nil, fmt.Errorf("istiod %s: already installed by this run", c.Name)
	}
	mf, err := install.Render(install.Options{Cluster: c.Cluster, MeshID: p.opts.MeshID, Images: p.opts.Images, CACerts: o.CA, Platform: p.platformOf(c.Name)})
	if err != nil {
		return nil, err
	}
	m.manifests = mf
	if err := p.apply(ctx, m, controlPlaneComponents...); err != nil {
		return nil, err
	}
	dir, err := p.clusterDir(c.Name)
	if err != nil {
		return nil, err
	}
	i, err := connectIstiod(ctx, c, dir, p.opts.Log)
	if err != nil {
		return nil, err
	}
	m.istiod = i
	return i, nil
}

// apply applies the named components of m's manifests, waiting for each, and records what it
// created for Destroy (also on error).
func (p *Provider) apply(ctx context.Context, m *member, names ...string) error {
	return p.applyWith(ctx, m, true, names...)
}

func (p *Provider) applyWith(ctx context.Context, m *member, wait bool, names ...string) error {
	if m.manifests == nil {
		return fmt.Errorf("cluster %s: Istio is not installed here by this run (StartIstiod did not run for it; with -provider=kube every primary needs its istiod, so use -mesh.istiods=all)", m.c.Name)
	}
	sub := &install.Manifests{Cluster: m.manifests.Cluster}
	for _, n := range names {
		comp := m.manifests.Component(n)
		if comp == nil {
			return fmt.Errorf("cluster %s: no %s component rendered", m.c.Name, n)
		}
		sub.Components = append(sub.Components, *comp)
	}
	inst, err := install.Apply(ctx, m.c, sub, install.ApplyOptions{Wait: wait, Timeout: p.opts.InstallTimeout, Log: p.opts.Log})
	if inst != nil {
		p.mu.Lock()
		m.installs = append(m.installs, inst)
		p.mu.Unlock()
	}
	return err
}

// Istiod is the in-cluster istiod of one primary as the test process reaches it.
type Istiod struct {
	cluster string
	c       *cluster.Cluster
	pod     string
	uid     types.UID
	fwd     *forward
	sampler *measure.Istiod
	logFile string

	runCtx context.Context // ends (cancel) the log stream and the watch
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
	exit   error
}

var _ cluster.Istiod = (*Istiod)(nil)

// connectIstiod finds c's ready istiod pod, forwards its metrics, ControlZ and xDS ports, streams
// its log into dir/istiod.log and watches it for deletion or a restart.
func connectIstiod(ctx context.Context, c *cluster.Cluster, dir string, log io.Writer) (*Istiod, error) {
	pod, err := readyIstiodPod(ctx, c)
	if err != nil {
		return nil, err
	}
	i := newIstiodHandle(c, pod, filepath.Join(dir, "istiod.log"))
	if i.fwd, err = forwardPod(c, mesh.SystemNamespace, pod.Name, []int{istiodMetricsPort, istiodCtrlzPort, istiodXDSPort},
		lineWriter{prefix: "ambientmc: " + c.Name + ": istiod port-forward: ", w: log}); err != nil {
		i.closeLocal()
		return nil, fmt.Errorf("istiod %s: %w", c.Name, err)
	}
	i.sampler = &measure.Istiod{
		Name:       c.Name + "/" + pod.Name,
		MetricsURL: "http://" + i.fwd.addr(istiodMetricsPort) + "/metrics",
		CtrlzURL:   "http://" + i.fwd.addr(istiodCtrlzPort),
	}
	i.streamLogs()
	return i, nil
}

// newIstiodHandle starts watching pod; the port-forwards and the log stream come separately.
func newIstiodHandle(c *cluster.Cluster, pod *corev1.Pod, logFile string) *Istiod {
	ctx, cancel := context.WithCancel(context.Background())
	i := &Istiod{cluster: c.Name, c: c, pod: pod.Name, uid: pod.UID, logFile: logFile, runCtx: ctx, cancel: cancel, done: make(chan struct{})}
	i.wg.Add(1)
	go func() {
		defer i.wg.Done()
		i.watch(ctx, restarts(pod))
	}()
	return i
}

func readyIstiodPod(ctx context.Context, c *cluster.Cluster) (*corev1.Pod, error) {
	pods, err := c.Client.CoreV1().Pods(mesh.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=istiod"})
	if err != nil {
		return nil, fmt.Errorf("istiod %s: listing its pods: %w", c.Name, err)
	}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("istiod %s: no ready pod with label app=istiod in %s (%d pods)", c.Name, mesh.SystemNamespace, len(pods.Items))
	}
	// The newest: after a rollout the old pod is on its way out.
	sort.Slice(ready, func(a, b int) bool { return ready[b].CreationTimestamp.Before(&ready[a].CreationTimestamp) })
	return &ready[0], nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// watch closes done when the pod is deleted, replaced (another UID) or a container restarts.
func (i *Istiod) watch(ctx context.Context, base int32) {
	pods := i.c.Client.CoreV1().Pods(mesh.SystemNamespace)
	sel := fields.OneTermEqualSelector("metadata.name", i.pod).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}
	var exit error
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(store cache.Store) (bool, error) {
		obj, ok, err := store.GetByKey(mesh.SystemNamespace + "/" + i.pod)
		if err != nil {
			return false, err
		}
		if !ok || obj.(*corev1.Pod).UID != i.uid {
			exit = fmt.Errorf("istiod pod %s/%s is gone", mesh.SystemNamespace, i.pod)
			return true, nil
		}
		return false, nil
	}, func(ev watch.Event) (bool, error) {
		p, _ := ev.Object.(*corev1.Pod)
		switch {
		case ev.Type == watch.Deleted:
			exit = fmt.Errorf("istiod pod %s/%s was deleted", mesh.SystemNamespace, i.pod)
		case p != nil && p.UID != i.uid:
			exit = fmt.Errorf("istiod pod %s/%s was replaced", mesh.SystemNamespace, i.pod)
		case p != nil && restarts(p) > base:
			exit = fmt.Errorf("istiod pod %s/%s restarted (%d restarts)", mesh.SystemNamespace, i.pod, restarts(p))
		}
		return exit != nil, nil
	})
	if exit == nil {
		if ctx.Err() != nil {
			exit = errors.New("istiod handle stopped")
		} else {
			exit = fmt.Errorf("watching istiod pod %s/%s: %v", mesh.SystemNamespace, i.pod, err)
		}
	}
	i.exit = exit
	close(i.done)
}

// streamLogs follows istiod's log into the log file until the handle stops or the pod goes.
func (i *Istiod) streamLogs() {
	i.wg.Add(1)
	go func() {
		defer i.wg.Done()
		f, err := os.OpenFile(i.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return
		}
		defer f.Close()
		stream, err := i.c.Client.CoreV1().Pods(mesh.SystemNamespace).GetLogs(i.pod, &corev1.PodLogOptions{Container: "discovery", Follow: true}).Stream(i.runCtx)
		if err != nil {
			fmt.Fprintf(f, "ambientmc: streaming the log of %s: %v\n", i.pod, err)
			return
		}
		defer stream.Close()
		_, _ = io.Copy(f, stream)
	}()
}

func (i *Istiod) Cluster() string          { return i.cluster }
func (i *Istiod) Sampler() *measure.Istiod { return i.sampler }
func (i *Istiod) XDSAddress() string       { return i.fwd.addr(istiodXDSPort) }
func (i *Istiod) LogFile() string          { return i.logFile }
func (i *Istiod) Done() <-chan struct{}    { return i.done }

// ExitErr says why Done closed: the pod was deleted, replaced or restarted.
func (i *Istiod) ExitErr() error {
	select {
	case <-i.done:
		return i.exit
	default:
		return nil
	}
}

// Tail returns the last n lines of the streamed log.
func (i *Istiod) Tail(n int) string {
	data, err := os.ReadFile(i.logFile)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Kill deletes the istiod pod with no grace period (its Deployment starts another, which this
// handle does not follow).
func (i *Istiod) Kill() error {
	err := i.c.Client.CoreV1().Pods(mesh.SystemNamespace).Delete(context.Background(), i.pod, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &i.uid},
	})
	if err != nil {
		return fmt.Errorf("istiod %s: deleting pod %s: %w", i.cluster, i.pod, err)
	}
	return nil
}

// Stop ends the port-forwards, the log stream and the watch. The install itself stays until the
// provider's Destroy.
func (i *Istiod) Stop() error {
	i.closeLocal()
	return nil
}

func (i *Istiod) closeLocal() {
	if i.fwd != nil {
		i.fwd.Close()
	}
	i.cancel()
	i.wg.Wait()
}

// String is for logs.
func (i *Istiod) String() string {
	return strings.Join([]string{i.cluster, i.pod}, "/")
}
