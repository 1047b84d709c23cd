package incluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
)

// newIstiodHandle opens the local ports and starts watching pod; the port-forwards and the log
// stream come separately.
func newIstiodHandle(c *cluster.Cluster, pod *corev1.Pod, logFile string) (*IstiodPod, error) {
	r, err := newRelay(istiodPorts)
	if err != nil {
		return nil, fmt.Errorf("istiod %s: local ports: %w", c.Name, err)
	}
	i := &IstiodPod{cluster: c.Name, c: c, logFile: logFile, log: io.Discard, relay: r}
	i.h = i.watchPod(pod)
	return i, nil
}

// watchPod starts a handle on pod, watching it for deletion, replacement or a restart.
func (i *IstiodPod) watchPod(pod *corev1.Pod) *podHandle {
	ctx, cancel := context.WithCancel(context.Background())
	h := &podHandle{pod: pod.Name, uid: pod.UID, runCtx: ctx, cancel: cancel, done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		i.watch(ctx, h, restarts(pod))
		// The pod is gone (or the handle stopped): its forward's connections go with it.
		i.mu.Lock()
		fwd := h.fwd
		i.mu.Unlock()
		if fwd != nil {
			i.relay.drop(fwd)
		}
	}()
	return h
}

func (i *IstiodPod) handle() *podHandle {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.h
}

// istiodRestartTimeout bounds how long the Deployment may take to bring up the next pod.
const istiodRestartTimeout = 5 * time.Minute

// Restart deletes istiod's pod (unless it is gone already, e.g. after Kill), waits until its
// Deployment's next pod is Ready and points the handle at it: the relay's local ports pass to its
// port-forwards, so samplers and xDS clients reconnect where they were; the log stream (appended
// to the same file) and the watch follow it.
func (i *IstiodPod) Restart(ctx context.Context) error {
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
	old.close()
	i.mu.Lock()
	i.h = i.watchPod(pod)
	i.mu.Unlock()
	return i.reach()
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
func (i *IstiodPod) watch(ctx context.Context, h *podHandle, base int32) {
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
