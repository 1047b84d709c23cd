package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/proc"
)

// Mesh is ambient installed across the clusters of an environment: one shared root CA, an
// intermediate and an east-west gateway per cluster, istiod per primary. Clusters start unjoined:
// Join exchanges remote secrets one cluster at a time.
type Mesh struct {
	Root          *pki.Root
	Intermediates map[string]*pki.Intermediate
	Istiods       map[string]*Istiod
	Clusters      []*cluster.Cluster
	provider      cluster.Provider

	mu       sync.Mutex
	gateways map[string]string         // cluster -> east-west gateway address
	secrets  map[string]*corev1.Secret // cluster -> the remote secret that lets others read it
	joined   []string                  // clusters in the mesh, in join order
	// held is, per primary, the remote clusters its istiod has held since it (re)started: istiod
	// keeps part of a cluster's memory after it leaves (istio/istio#61263), so a measurement
	// "from nothing" needs an istiod that held none.
	held map[string]map[string]bool
	// dropped is, per primary, the held remote clusters its istiod has since let go of or rebuilt
	// (a leave, a rotated secret): an istiod with none is in the state a fresh one joined to what
	// it holds would be.
	dropped map[string]map[string]bool
	// touches counts TouchSecret's rewrites, the value of the label it changes.
	touches int
}

// Options configure StartIstiods.
type Options struct {
	IstiodBinary string
	Dir          string // per-istiod working directories go here
	// Istiods selects which primaries run istiod; nil means all of them.
	Istiods func(c *cluster.Cluster) bool
	Log     io.Writer
	// GatewayTimeout bounds the wait for an east-west gateway's address.
	GatewayTimeout time.Duration
}

// Install sets up PKI in every cluster (in parallel) and prepares each cluster's remote secret
// without applying it. StartIstiods starts the control planes and the east-west gateways through
// the provider.
func Install(ctx context.Context, p cluster.Provider, clusters []*cluster.Cluster) (*Mesh, error) {
	root, err := pki.NewRoot()
	if err != nil {
		return nil, err
	}
	m := &Mesh{Root: root, Clusters: clusters, Intermediates: map[string]*pki.Intermediate{}, provider: p,
		Istiods: map[string]*Istiod{}, secrets: map[string]*corev1.Secret{}, gateways: map[string]string{},
		held: map[string]map[string]bool{}, dropped: map[string]map[string]bool{}}
	for _, c := range clusters {
		if m.Intermediates[c.Name], err = root.NewIntermediate(c.Name); err != nil {
			return nil, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range clusters {
		g.Go(func() error {
			return m.installCluster(gctx, c)
		})
	}
	err = g.Wait()
	if err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

func (m *Mesh) installCluster(ctx context.Context, c *cluster.Cluster) error {
	inter := m.Intermediates[c.Name]
	if _, err := c.Client.CoreV1().Secrets(SystemNamespace).Create(ctx, inter.CACertsSecret(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster %s: cacerts: %w", c.Name, err)
	}
	secret, err := RemoteSecret(ctx, c)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.secrets[c.Name] = secret
	m.mu.Unlock()
	return nil
}

// StartIstiods starts istiod for every primary that o.Istiods selects, then every cluster's
// east-west gateway, in parallel across clusters. Starting them after the workloads exist lets
// each istiod sync its own cluster once instead of pod by pod; the gateway comes after istiod
// because on real clusters istiod creates the gateway class and deploys the gateway.
func (m *Mesh) StartIstiods(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.GatewayTimeout == 0 {
		o.GatewayTimeout = 5 * time.Minute
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range m.Clusters {
		g.Go(func() error {
			if c.IsPrimary() && (o.Istiods == nil || o.Istiods(c)) {
				start := time.Now()
				i, err := m.provider.ControlPlane().StartIstiod(gctx, c, cluster.IstiodOptions{
					Binary: o.IstiodBinary,
					Dir:    filepath.Join(o.Dir, c.Name),
					CA:     CACertsOf(m.Intermediates[c.Name]),
				})
				if err != nil {
					return err
				}
				m.mu.Lock()
				m.Istiods[c.Name] = Observe(i)
				m.mu.Unlock()
				fmt.Fprintf(o.Log, "ambientmc: %s: istiod ready in %.1fs\n", c.Name, time.Since(start).Seconds())
			}
			addr, err := m.provider.Gateways().EastWestGateway(gctx, c, o.GatewayTimeout)
			if err != nil {
				return fmt.Errorf("cluster %s: east-west gateway: %w", c.Name, err)
			}
			m.mu.Lock()
			m.gateways[c.Name] = addr
			m.mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// GatewayAddress is the address in c's east-west Gateway status ("" before StartIstiods).
func (m *Mesh) GatewayAddress(c string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gateways[c]
}

// Cluster returns the named cluster or nil.
func (m *Mesh) Cluster(name string) *cluster.Cluster {
	for _, c := range m.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Joined lists the clusters in the mesh, in join order.
func (m *Mesh) Joined() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.joined...)
}

// Join adds cluster name to the mesh: every joined primary gets its remote secret, and it gets the
// secret of every joined cluster, so the mesh stays fully multi-primary after each step. The first
// cluster joined forms a mesh of one. If a secret cannot be written, the ones already written are
// removed again, so a failed Join leaves the mesh as it was.
func (m *Mesh) Join(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	newcomer := m.Cluster(name)
	if newcomer == nil || m.secrets[name] == nil {
		return fmt.Errorf("join: unknown cluster %q", name)
	}
	if slices.Contains(m.joined, name) {
		return fmt.Errorf("join: %s is already in the mesh", name)
	}
	type written struct {
		into   *cluster.Cluster
		remote string
	}
	var done []written
	apply := func(into *cluster.Cluster, remote string) error {
		if err := ApplySecret(ctx, into, m.secrets[remote]); err != nil {
			return err
		}
		done = append(done, written{into, remote})
		return nil
	}
	for _, j := range m.joined {
		other := m.Cluster(j)
		var err error
		if other.IsPrimary() {
			err = apply(other, name)
		}
		if err == nil && newcomer.IsPrimary() {
			err = apply(newcomer, j)
		}
		if err != nil {
			// Best effort with a fresh context: the caller's may be what failed.
			undo, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var undoErrs []error
			for _, w := range done {
				undoErrs = append(undoErrs, DeleteSecret(undo, w.into, w.remote))
			}
			if uerr := errors.Join(undoErrs...); uerr != nil {
				return fmt.Errorf("join of %s failed: %w; removing the %d secrets already written also failed: %v", name, err, len(done), uerr)
			}
			return fmt.Errorf("join of %s failed (the %d secrets already written were removed): %w", name, len(done), err)
		}
	}
	m.joined = append(m.joined, name)
	for _, a := range m.joined {
		for _, b := range m.joined {
			if a != b && m.Cluster(a).IsPrimary() {
				m.holds(a, b)
			}
		}
	}
	return nil
}

// holds records that primary's istiod now holds remote (m.mu held).
func (m *Mesh) holds(primary, remote string) {
	if m.held == nil {
		m.held = map[string]map[string]bool{}
	}
	if m.held[primary] == nil {
		m.held[primary] = map[string]bool{}
	}
	m.held[primary][remote] = true
}

// drops records that primary's istiod let remote go or rebuilt it (m.mu held).
func (m *Mesh) drops(primary, remote string) {
	if !m.held[primary][remote] {
		return
	}
	if m.dropped == nil {
		m.dropped = map[string]map[string]bool{}
	}
	if m.dropped[primary] == nil {
		m.dropped[primary] = map[string]bool{}
	}
	m.dropped[primary][remote] = true
}

// Dropped lists the remote clusters primary's istiod has let go of or rebuilt (a leave, a rotated
// secret) since it started or restarted.
func (m *Mesh) Dropped(primary string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.dropped[primary]))
}

// Held lists the remote clusters primary's istiod has held since it started or restarted.
func (m *Mesh) Held(primary string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.held[primary]))
}

// Restartable says whether primary runs an istiod its provider can restart in place
// (cluster.IstiodRestarter).
func (m *Mesh) Restartable(primary string) bool {
	m.mu.Lock()
	i := m.Istiods[primary]
	m.mu.Unlock()
	if i == nil {
		return false
	}
	_, ok := i.Istiod.(cluster.IstiodRestarter)
	return ok
}

// RestartIstiod restarts primary's istiod in place (same addresses), which must be Restartable, and
// waits until it is ready again; what it held before is forgotten. Clusters still joined are held
// again by the new process.
func (m *Mesh) RestartIstiod(ctx context.Context, primary string) error {
	m.mu.Lock()
	i := m.Istiods[primary]
	m.mu.Unlock()
	if i == nil {
		return fmt.Errorf("istiod %s: none runs", primary)
	}
	r, ok := i.Istiod.(cluster.IstiodRestarter)
	if !ok {
		return fmt.Errorf("istiod %s: its provider cannot restart it in place (check Restartable first)", primary)
	}
	if err := r.Restart(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, primary)
	delete(m.dropped, primary)
	if slices.Contains(m.joined, primary) {
		for _, j := range m.joined {
			if j != primary {
				m.holds(primary, j)
			}
		}
	}
	return nil
}

// RotateSecret writes remote's secret anew, with a fresh token for the same cluster, into every
// joined primary: an in-place rotation, as a credential rotation does it.
func (m *Mesh) RotateSecret(ctx context.Context, remote string) error {
	c := m.Cluster(remote)
	if c == nil {
		return fmt.Errorf("rotate: unknown cluster %q", remote)
	}
	fresh, err := RemoteSecret(ctx, c)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.secrets[remote] = fresh
	if !slices.Contains(m.joined, remote) {
		return nil
	}
	for _, j := range m.joined {
		if into := m.Cluster(j); j != remote && into.IsPrimary() {
			if err := ApplySecret(ctx, into, fresh); err != nil {
				return fmt.Errorf("rotate %s: %w", remote, err)
			}
			m.drops(j, remote)
		}
	}
	return nil
}

// TouchSecret rewrites remote's secret in every joined primary with the kubeconfig it holds and a
// label that changes: an update istiod takes up without rebuilding the cluster (it compares the
// kubeconfig's hash), the istiod checks' control for an in-place rotation without the rotation.
func (m *Mesh) TouchSecret(ctx context.Context, remote string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.secrets[remote]
	if s == nil {
		return fmt.Errorf("touch: unknown cluster %q", remote)
	}
	if !slices.Contains(m.joined, remote) {
		return nil
	}
	m.touches++
	touched := s.DeepCopy()
	if touched.Labels == nil {
		touched.Labels = map[string]string{}
	}
	touched.Labels[touchLabel] = strconv.Itoa(m.touches)
	for _, j := range m.joined {
		if into := m.Cluster(j); j != remote && into.IsPrimary() {
			if err := ApplySecret(ctx, into, touched); err != nil {
				return fmt.Errorf("touch %s: %w", remote, err)
			}
		}
	}
	return nil
}

// touchLabel is the label TouchSecret changes.
const touchLabel = "ambientmc.io/touched"

// Leave removes cluster name from the mesh: its remote secret is deleted from every joined
// cluster, and theirs from it. The cluster counts as joined until every deletion succeeded, so a
// failed Leave can be retried.
func (m *Mesh) Leave(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idx := slices.Index(m.joined, name)
	if idx < 0 {
		return fmt.Errorf("leave: %s is not in the mesh", name)
	}
	leaver := m.Cluster(name)
	for _, j := range m.joined {
		if j == name {
			continue
		}
		if err := DeleteSecret(ctx, m.Cluster(j), name); err != nil {
			return fmt.Errorf("leave of %s: %w (it stays in the mesh; retry)", name, err)
		}
		if err := DeleteSecret(ctx, leaver, j); err != nil {
			return fmt.Errorf("leave of %s: %w (it stays in the mesh; retry)", name, err)
		}
		m.drops(j, name)
		m.drops(name, j)
	}
	m.joined = slices.Delete(m.joined, idx, idx+1)
	return nil
}

// Stop stops every istiod.
func (m *Mesh) Stop() {
	m.mu.Lock()
	istiods := m.Istiods
	m.mu.Unlock()
	proc.StopParallel(slices.Collect(maps.Values(istiods)), func(i *Istiod) { _ = i.Stop() })
}
