package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
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

// Istiod is the in-cluster istiod of one primary as the test process reaches it: through the
// pod it reaches now (a restart moves it to the next one).
type Istiod struct {
	cluster string
	c       *cluster.Cluster
	sampler *measure.Istiod
	logFile string
	log     io.Writer // port-forward errors

	mu sync.Mutex
	h  *podHandle
}

// podHandle is one istiod pod as reached: its port-forwards, log stream and watch.
type podHandle struct {
	pod string
	uid types.UID
	fwd *forward

	runCtx context.Context // ends (cancel) the log stream and the watch
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
	exit   error
}

var (
	_ cluster.Istiod          = (*Istiod)(nil)
	_ cluster.IstiodRestarter = (*Istiod)(nil)
)

// istiodPorts are what a handle forwards: metrics, ControlZ and xDS.
var istiodPorts = []int{istiodMetricsPort, istiodCtrlzPort, istiodXDSPort}

// forwardIstiod reaches an istiod pod's ports, on the given local ports (nil: the kernel picks).
// Tests on API servers without a kubelet, where no port-forward can work, replace it.
var forwardIstiod = func(c *cluster.Cluster, pod string, local map[int]int, log io.Writer) (*forward, error) {
	return forwardPodOn(c, mesh.SystemNamespace, pod, istiodPorts, local, log)
}

// connectIstiod finds c's ready istiod pod, forwards its metrics, ControlZ and xDS ports, streams
// its log into dir/istiod.log and watches it for deletion or a restart.
func connectIstiod(ctx context.Context, c *cluster.Cluster, dir string, log io.Writer) (*Istiod, error) {
	pod, err := readyIstiodPod(ctx, c)
	if err != nil {
		return nil, err
	}
	i := newIstiodHandle(c, pod, filepath.Join(dir, "istiod.log"))
	i.log = lineWriter{prefix: "ambientmc: " + c.Name + ": istiod port-forward: ", w: log}
	if err := i.reach(nil); err != nil {
		i.closeLocal()
		return nil, err
	}
	i.sampler = &measure.Istiod{
		Name:       c.Name + "/" + pod.Name,
		MetricsURL: "http://" + i.handle().fwd.addr(istiodMetricsPort) + "/metrics",
		CtrlzURL:   "http://" + i.handle().fwd.addr(istiodCtrlzPort),
		// istiod registers /debug (pprof, clusterz, krtz) on the monitoring mux as well
		// (pilot/pkg/bootstrap/server.go:680, InitDebug(s.monitoringMux, ...)); through the
		// port-forward the request comes from the pod's loopback, which istiod serves unauthenticated.
		DebugURL: "http://" + i.handle().fwd.addr(istiodMetricsPort),
	}
	return i, nil
}

// reach forwards the current pod's ports (on local, when given) and streams its log.
func (i *Istiod) reach(local map[int]int) error {
	h := i.handle()
	fwd, err := forwardIstiod(i.c, h.pod, local, i.log)
	if err != nil {
		return fmt.Errorf("istiod %s: %w", i.cluster, err)
	}
	i.mu.Lock()
	h.fwd = fwd
	i.mu.Unlock()
	i.streamLogs(h)
	return nil
}

// newIstiodHandle starts watching pod; the port-forwards and the log stream come separately.
func newIstiodHandle(c *cluster.Cluster, pod *corev1.Pod, logFile string) *Istiod {
	i := &Istiod{cluster: c.Name, c: c, logFile: logFile, log: io.Discard}
	i.h = i.watchPod(pod)
	return i
}

// watchPod starts a handle on pod, watching it for deletion, replacement or a restart.
func (i *Istiod) watchPod(pod *corev1.Pod) *podHandle {
	ctx, cancel := context.WithCancel(context.Background())
	h := &podHandle{pod: pod.Name, uid: pod.UID, runCtx: ctx, cancel: cancel, done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		i.watch(ctx, h, restarts(pod))
	}()
	return h
}

func (i *Istiod) handle() *podHandle {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.h
}

// istiodRestartTimeout bounds how long the Deployment may take to bring up the next pod.
const istiodRestartTimeout = 5 * time.Minute

// Restart deletes istiod's pod (unless it is gone already, e.g. after Kill), waits until its
// Deployment's next pod is Ready and points the handle at it: port-forwards on the same local
// ports, so the sampler and xDS clients reconnect where they were, the log stream (appended to
// the same file) and the watch.
func (i *Istiod) Restart(ctx context.Context) error {
	old := i.handle()
	select {
	case <-old.done:
	default:
		if err := i.Kill(); err != nil {
			return err
		}
	}
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, istiodRestartTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := readyIstiodPod(ctx, i.c)
		if err != nil || p.UID == old.uid {
			return false, nil
		}
		pod = p
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("istiod %s: no new ready istiod pod within %s after %s went: %w", i.cluster, istiodRestartTimeout, old.pod, err)
	}
	var local map[int]int
	if old.fwd != nil {
		local = maps.Clone(old.fwd.local)
	}
	old.close()
	i.mu.Lock()
	i.h = i.watchPod(pod)
	i.mu.Unlock()
	if i.sampler != nil {
		i.sampler.Name = i.cluster + "/" + pod.Name
	}
	return i.reach(local)
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

// watch closes h.done when h's pod is deleted, replaced (another UID) or a container restarts.
func (i *Istiod) watch(ctx context.Context, h *podHandle, base int32) {
	pods := i.c.Client.CoreV1().Pods(mesh.SystemNamespace)
	sel := fields.OneTermEqualSelector("metadata.name", h.pod).String()
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
		obj, ok, err := store.GetByKey(mesh.SystemNamespace + "/" + h.pod)
		if err != nil {
			return false, err
		}
		if !ok || obj.(*corev1.Pod).UID != h.uid {
			exit = fmt.Errorf("istiod pod %s/%s is gone", mesh.SystemNamespace, h.pod)
			return true, nil
		}
		return false, nil
	}, func(ev watch.Event) (bool, error) {
		p, _ := ev.Object.(*corev1.Pod)
		switch {
		case ev.Type == watch.Deleted:
			exit = fmt.Errorf("istiod pod %s/%s was deleted", mesh.SystemNamespace, h.pod)
		case p != nil && p.UID != h.uid:
			exit = fmt.Errorf("istiod pod %s/%s was replaced", mesh.SystemNamespace, h.pod)
		case p != nil && restarts(p) > base:
			exit = fmt.Errorf("istiod pod %s/%s restarted (%d restarts)", mesh.SystemNamespace, h.pod, restarts(p))
		}
		return exit != nil, nil
	})
	if exit == nil {
		if ctx.Err() != nil {
			exit = errors.New("istiod handle stopped")
		} else {
			exit = fmt.Errorf("watching istiod pod %s/%s: %v", mesh.SystemNamespace, h.pod, err)
		}
	}
	h.exit = exit
	close(h.done)
}

// streamLogs follows h's pod's log into the log file until the handle stops or the pod goes.
func (i *Istiod) streamLogs(h *podHandle) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f, err := os.OpenFile(i.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return
		}
		defer f.Close()
		stream, err := i.c.Client.CoreV1().Pods(mesh.SystemNamespace).GetLogs(h.pod, &corev1.PodLogOptions{Container: "discovery", Follow: true}).Stream(h.runCtx)
		if err != nil {
			fmt.Fprintf(f, "ambientmc: streaming the log of %s: %v\n", h.pod, err)
			return
		}
		defer stream.Close()
		_, _ = io.Copy(f, stream)
	}()
}

func (i *Istiod) Cluster() string          { return i.cluster }
func (i *Istiod) Sampler() *measure.Istiod { return i.sampler }
func (i *Istiod) XDSAddress() string       { return i.handle().fwd.addr(istiodXDSPort) }
func (i *Istiod) LogFile() string          { return i.logFile }
func (i *Istiod) Done() <-chan struct{}    { return i.handle().done }

// ExitErr says why Done closed: the pod was deleted, replaced or restarted.
func (i *Istiod) ExitErr() error {
	h := i.handle()
	select {
	case <-h.done:
		return h.exit
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
	h := i.handle()
	err := i.c.Client.CoreV1().Pods(mesh.SystemNamespace).Delete(context.Background(), h.pod, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &h.uid},
	})
	if err != nil {
		return fmt.Errorf("istiod %s: deleting pod %s: %w", i.cluster, h.pod, err)
	}
	return nil
}

// Stop ends the port-forwards, the log stream and the watch. The install itself stays until the
// provider's Destroy.
func (i *Istiod) Stop() error {
	i.closeLocal()
	return nil
}

func (i *Istiod) closeLocal() { i.handle().close() }

func (h *podHandle) close() {
	if h.fwd != nil {
		h.fwd.Close()
	}
	h.cancel()
	h.wg.Wait()
}

// String is for logs.
func (i *Istiod) String() string {
	return strings.Join([]string{i.cluster, i.handle().pod}, "/")
}
