package incluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/report"
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

// controlPlaneOnly is what StartIstiod applies without a data plane: istio-cni and ztunnel have
// no images then.
var controlPlaneOnly = controlPlaneComponents[:3]

// StartIstiod installs Istio ambient into primary c (the Gateway API CRDs, base with the
// cluster's cacerts, istiod, istio-cni, ztunnel, each waited for, in Istio's installer's order),
// then reaches the istiod pod through port-forwards. A second istiod (o.Name != "") is
// StartExtraIstiod's, where offered.
func (p *Provider) StartIstiod(ctx context.Context, c *cluster.Cluster, o cluster.IstiodOptions) (cluster.Istiod, error) {
	if o.Name != "" {
		return nil, fmt.Errorf("istiod %s/%s: a second istiod is cluster.ExtraIstiods', which ControlPlane offers only where the images' build is known (make images, or -istio.build)", c.Name, o.Name)
	}
	ca, err := mesh.IntermediateOf(c.Name, o.CA)
	if err != nil {
		return nil, fmt.Errorf("istiod %s: %w", c.Name, err)
	}
	m, err := p.member(c.Name)
	if err != nil {
		return nil, err
	}
	if m.istiod != nil {
		return nil, fmt.Errorf("istiod %s: already installed by this run", c.Name)
	}
	mf, err := install.Render(install.Options{Cluster: c.Cluster, MeshID: p.opts.MeshID, Images: p.opts.Images, CACerts: ca, Platform: p.platformOf(c.Name), SharedHost: p.opts.SharedHost})
	if err != nil {
		return nil, err
	}
	m.manifests = mf
	comps := controlPlaneComponents
	if p.opts.Images.RunsDataPlane() == report.DataPlaneNone {
		comps = controlPlaneOnly
	}
	if err := p.apply(ctx, m, comps...); err != nil {
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

// hostIstiods is the in-cluster control plane with images of a known build (the ones make images
// builds, or -istio.build): it offers cluster.ExtraIstiods, whose second istiod must be the build
// the cluster runs (the binary cache's pilot-discovery of that version).
type hostIstiods struct{ *Provider }

// StartExtraIstiod runs a second istiod for c (a named one: the property checks' isolated and
// extra istiods) as pilot-discovery on this host, reading the cluster through its kubeconfig,
// beside the in-cluster one.
func (h hostIstiods) StartExtraIstiod(ctx context.Context, c *cluster.Cluster, o cluster.IstiodOptions) (cluster.Istiod, error) {
	p := h.Provider
	if o.Name == "" {
		return nil, fmt.Errorf("istiod %s: an extra istiod needs a name", c.Name)
	}
	m, err := p.member(c.Name)
	if err != nil {
		return nil, err
	}
	if o.Binary == "" {
		cache, err := bins.Default()
		if err != nil {
			return nil, err
		}
		paths, err := cache.Ensure(ctx, bins.PilotDiscovery)
		if err != nil {
			return nil, err
		}
		o.Binary = paths[bins.PilotDiscovery]
	}
	i, err := hostistiod.Start(ctx, c, o)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	m.hostIstiods = append(m.hostIstiods, i)
	p.mu.Unlock()
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

// IstiodPod is the in-cluster istiod of one primary as the test process reaches it: through the
// pod it reaches now (a restart moves it to the next one).
type IstiodPod struct {
	cluster string
	c       *cluster.Cluster
	logFile string
	log     io.Writer // port-forward errors
	relay   *relay    // the local ports, whichever pod serves them

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
	_ cluster.Istiod          = (*IstiodPod)(nil)
	_ cluster.IstiodRestarter = (*IstiodPod)(nil)
)

func (i *IstiodPod) Cluster() string       { return i.cluster }
func (i *IstiodPod) XDSAddress() string    { return i.relay.addr(istiodXDSPort) }
func (i *IstiodPod) LogFile() string       { return i.logFile }
func (i *IstiodPod) Done() <-chan struct{} { return i.handle().done }

// ExitErr says why Done closed: the pod was deleted, replaced or restarted.
func (i *IstiodPod) ExitErr() error {
	h := i.handle()
	select {
	case <-h.done:
		return h.exit
	default:
		return nil
	}
}

// Tail returns the last n lines of the streamed log.
func (i *IstiodPod) Tail(n int) string {
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
func (i *IstiodPod) Kill() error {
	h := i.handle()
	err := i.c.Client.CoreV1().Pods(mesh.SystemNamespace).Delete(context.Background(), h.pod, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &h.uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Already gone, or replaced (the UID precondition): what Kill is for has happened; the
		// handle's watch may not have seen it yet.
		return nil
	}
	if err != nil {
		return fmt.Errorf("istiod %s: deleting pod %s: %w", i.cluster, h.pod, err)
	}
	return nil
}

// Stop ends the port-forwards, the log stream and the watch. The install itself stays until the
// provider's Destroy.
func (i *IstiodPod) Stop() error {
	i.closeLocal()
	return nil
}

func (i *IstiodPod) closeLocal() {
	i.handle().close()
	i.relay.Close()
}

func (h *podHandle) close() {
	if h.fwd != nil {
		h.fwd.Close()
	}
	h.cancel()
	h.wg.Wait()
}

// String is for logs.
func (i *IstiodPod) String() string {
	return strings.Join([]string{i.cluster, i.handle().pod}, "/")
}
