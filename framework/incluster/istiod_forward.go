package incluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
)

// istiodPorts are what a handle forwards: metrics, ControlZ and xDS.
var istiodPorts = []int{istiodMetricsPort, istiodCtrlzPort, istiodXDSPort}

// forwardIstiod reaches an istiod pod's ports. Tests on API servers without a kubelet, where no
// port-forward can work, replace it.
var forwardIstiod = func(c *cluster.Cluster, pod string, log io.Writer) (*forward, error) {
	return forwardPod(c, mesh.SystemNamespace, pod, istiodPorts, log)
}

// connectIstiod finds c's ready istiod pod, forwards its metrics, ControlZ and xDS ports, streams
// its log into dir/istiod.log and watches it for deletion or a restart.
func connectIstiod(ctx context.Context, c *cluster.Cluster, dir string, log io.Writer) (*IstiodPod, error) {
	pod, err := readyIstiodPod(ctx, c)
	if err != nil {
		return nil, err
	}
	i, err := newIstiodHandle(c, pod, filepath.Join(dir, "istiod.log"))
	if err != nil {
		return nil, err
	}
	i.log = lineWriter{prefix: "ambientmc: " + c.Name + ": istiod port-forward: ", w: log}
	if err := i.reach(); err != nil {
		i.closeLocal()
		return nil, err
	}
	return i, nil
}

// Endpoints are istiod's metrics and ControlZ ports as relayed here, to whichever pod serves. istiod registers
// /debug (pprof, clusterz, krtz) on the monitoring mux as well (pilot/pkg/bootstrap/server.go:680,
// InitDebug(s.monitoringMux, ...)); through the port-forward the request comes from the pod's
// loopback, which istiod serves unauthenticated.
func (i *IstiodPod) Endpoints() cluster.IstiodEndpoints {
	return cluster.IstiodEndpoints{
		Name:       i.cluster + "/" + i.handle().pod,
		MetricsURL: "http://" + i.relay.addr(istiodMetricsPort) + "/metrics",
		CtrlzURL:   "http://" + i.relay.addr(istiodCtrlzPort),
		DebugURL:   "http://" + i.relay.addr(istiodMetricsPort),
	}
}

// reach forwards the current pod's ports, points the relay at them and streams the pod's log.
func (i *IstiodPod) reach() error {
	h := i.handle()
	fwd, err := forwardIstiod(i.c, h.pod, i.log)
	if err != nil {
		return fmt.Errorf("istiod %s: %w", i.cluster, err)
	}
	i.mu.Lock()
	h.fwd = fwd
	i.mu.Unlock()
	select {
	case <-h.done:
		// Gone already: the relay keeps refusing until the next pod.
	default:
		i.relay.point(fwd)
	}
	i.streamLogs(h)
	return nil
}

// streamLogs follows h's pod's log into the log file until the handle stops or the pod goes.
func (i *IstiodPod) streamLogs(h *podHandle) {
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
