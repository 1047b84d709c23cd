package kind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/kindnode"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/nodeimages"
	"github.com/ambientmc/ambientmc/topology"
)

// Host needs per cluster. Memory: a kind node idles at about 0.6-0.9 GB and ambient (istiod,
// ztunnel, istio-cni, the east-west gateway, MetalLB) adds 0.3-0.5 GB (notes, section 3: an
// estimate, no authoritative figure exists); the upper end is asked for. inotify is not
// namespaced, so every node shares the host user's budget: with Ubuntu's default of 128
// instances the 4th cluster fails (kind#3317), so about 40 instances per cluster.
const (
	MemoryPerCluster           = 1536 << 20
	InotifyInstancesPerCluster = 40
	InotifyWatchesPerCluster   = 8192
)

// Host is what preflight reads from the machine; tests replace it.
type Host struct {
	// MemAvailable returns MemAvailable from /proc/meminfo.
	MemAvailable func() (uint64, error)
	// Sysctl returns an integer under /proc/sys, e.g. "fs/inotify/max_user_instances".
	Sysctl func(name string) (int, error)
}

// RealHost reads /proc.
var RealHost = Host{MemAvailable: measure.HostMemoryAvailable, Sysctl: sysctl}

// Preflight checks, one clear line each and before any cluster is created: the topology fits, the
// flags are usable, Docker answers, the node image is there (or pullable), the inotify limits and
// the free memory suffice for the number of clusters, no cluster of the same name exists, and the
// kind docker network (created here if missing, as kind would) has room for every cluster's
// LoadBalancer pool.
// Every failing check is reported; passing checks print a line to the log.
func (p *Provider) Preflight(ctx context.Context, t *topology.Topology) error {
	if err := t.Check(capabilities); err != nil {
		return err
	}
	n := len(t.Clusters)
	var fails []string
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	ok := func(format string, args ...any) {
		fmt.Fprintf(p.opts.Log, "ambientmc: kind preflight: "+format+"\n", args...)
	}

	if p.opts.Istio.Hub == "" || p.opts.Istio.Tag == "" {
		fail("istio images: -istio.hub and -istio.tag are required with -provider=kind (e.g. -istio.hub=registry.istio.io/testing -istio.tag=1.31-dev): the kind clusters run real istiod, ztunnel and gateway images")
	}
	if _, err := kindconfig.KubeadmAPIVersion(p.image()); err != nil {
		fail("%v", err)
	} else {
		for _, c := range t.Clusters {
			if _, err := kindconfig.Config(c, p.opts.node()); err != nil {
				fail("%v", err)
			}
		}
	}
	for _, c := range t.Clusters {
		if c.Kubeconfig != "" {
			ok("the kind provider ignores the kubeconfig paths in %s (meta.kubeconfig) and creates its own clusters", t.Source)
			break
		}
	}
	if a := p.opts.DataPlane; a != "" {
		if st, err := os.Stat(a); err != nil || !st.Mode().IsRegular() {
			fail("the emulated data plane's images: %s is not there, or was written from other sources; run `make images`", a)
		}
	}
	for _, a := range p.opts.Load {
		if st, err := os.Stat(a); err != nil || !st.Mode().IsRegular() {
			fail("-kind.load=%s: not a readable image archive file; write one with `docker image save --platform linux/amd64 -o %s IMAGE` (single-platform: kind's import fails on multi-platform archives from Docker's containerd store)", a, filepath.Base(a))
		}
	}

	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	version, err := p.docker.ServerVersion(dctx)
	switch {
	case errors.Is(err, dockerhost.ErrNoDockerCLI):
		fail("docker: the docker CLI is not on PATH; kind creates clusters by running it: install Docker (https://docs.docker.com/engine/install/) or use -provider=local, which needs no Docker")
	case err != nil:
		fail("docker: the Docker daemon is not reachable (%v); start it (e.g. `sudo systemctl start docker`) or point DOCKER_HOST at one, or use -provider=local, which needs no Docker", err)
	default:
		ok("docker: reachable (server %s)", version)
		p.checkDocker(dctx, t, ok, fail)
	}

	if inst, err := p.host.Sysctl("fs/inotify/max_user_instances"); err == nil {
		watches, werr := p.host.Sysctl("fs/inotify/max_user_watches")
		needI, needW := InotifyInstancesPerCluster*n, InotifyWatchesPerCluster*n
		if inst < needI || (werr == nil && watches < needW) {
			fail("inotify: fs.inotify.max_user_instances=%d, max_user_watches=%d are too low for %d kind clusters (need about %d and %d; nodes fail to boot or pods report \"too many open files\"); raise them: sudo sysctl fs.inotify.max_user_instances=%d fs.inotify.max_user_watches=%d",
				inst, watches, n, needI, needW, max(512, needI), max(524288, needW))
		} else {
			ok("inotify: max_user_instances=%d, max_user_watches=%d are enough for %d clusters", inst, watches, n)
		}
	}
	if avail, err := p.host.MemAvailable(); err == nil {
		need := uint64(n) * MemoryPerCluster
		if avail < need {
			fail("memory: %d kind clusters with ambient need about %.1f GB free (%.1f GB each), this host has %.1f GB available; use fewer -clusters", n, float64(need)/1e9, float64(MemoryPerCluster)/1e9, float64(avail)/1e9)
		} else {
			ok("memory: %.1f GB available, %d clusters need about %.1f GB", float64(avail)/1e9, n, float64(need)/1e9)
		}
	}
	switch len(fails) {
	case 0:
		return nil
	case 1:
		return errors.New("kind preflight: " + fails[0])
	default:
		return errors.New("kind preflight failed:\n  " + strings.Join(fails, "\n  "))
	}
}

// checkDocker runs the checks that need a reachable Docker. Nothing here asks a registry: a run
// never pulls, so every image must already be in Docker's store or in the node image.
func (p *Provider) checkDocker(ctx context.Context, t *topology.Topology, ok, fail func(string, ...any)) {
	p.checkNodeImage(ctx, ok, fail)
	existing, err := p.kind.List()
	if err != nil {
		fail("kind: listing existing clusters failed: %v", err)
		return
	}
	for _, c := range t.Clusters {
		name := kindconfig.KindName(c.Name)
		switch dir := keptBy(name); {
		case !slices.Contains(existing, name):
		case dir != "":
			fail("kind: a cluster named %s already exists, kept by an earlier run with -keep; remove that run's clusters and network and put the host back with: %s", name, RemoveCommand(dir))
		default:
			fail("kind: a cluster named %s already exists (an earlier run with -keep?); delete it: kind delete cluster --name %s", name, name)
		}
	}
	// The pools come from the run network's subnet: choose it now, so a network too small for N
	// pools fails here and not after every cluster was created.
	net, err := p.planRunNetwork(ctx)
	if err != nil {
		fail("docker network: %v", err)
		return
	}
	maxIndex := 0
	for _, c := range t.Clusters {
		maxIndex = max(maxIndex, c.Index)
	}
	if err := checkPools(net, maxIndex); err != nil {
		fail("%v", err)
		return
	}
	p.mu.Lock()
	p.net = net
	p.mu.Unlock()
	ok("docker network %s: internal, subnet %s (no other network or route uses it), room for the LoadBalancer pools of %d clusters", p.netName, net.Subnet, len(t.Clusters))
}

// checkNodeImage checks the node image is in Docker's store (and current, when it is the one
// make images builds) and that every image the run will start is in it or in a -kind.load archive.
func (p *Provider) checkNodeImage(ctx context.Context, ok, fail func(string, ...any)) {
	image := p.image()
	present, err := p.docker.ImagePresent(ctx, image)
	switch {
	case err != nil:
		fail("node image %s: docker image inspect failed: %v", image, err)
		return
	case !present && p.opts.Image == "":
		fail("node image %s: not built; run `make images` (it builds every image a kind run needs from the pinned sources; nothing is pulled)", image)
		return
	case !present:
		fail("node image %s (-kind.image): not in Docker's image store, and a run never pulls; pull or build it yourself, or leave -kind.image out to use the one `make images` builds", image)
		return
	}
	key, err := p.docker.ImageLabel(ctx, image, images.KeyLabel)
	if err != nil {
		fail("node image %s: %v", image, err)
		return
	}
	if p.opts.Image == "" && key != p.opts.Built.Key {
		fail("node image %s was built from other sources (key %q, these sources give %q): run `make images`", image, key, p.opts.Built.Key)
		return
	}
	p.mu.Lock()
	p.guarded = key != ""
	p.mu.Unlock()
	if key == "" {
		ok("node image %s: present; it is not one make images built, so it has no egress guard: the run's internal network alone keeps traffic on this host", image)
	} else {
		ok("node image %s: present and current (key %s), with the egress guard", image, key)
	}
	have := map[string]bool{}
	preloaded, err := p.docker.ImageLabel(ctx, image, images.PreloadLabel)
	if err != nil {
		fail("node image %s: %v", image, err)
		return
	}
	for _, r := range strings.Split(preloaded, ",") {
		have[r] = true
	}
	for _, a := range p.archives() {
		tags, err := kindnode.ArchiveTags(a)
		if err != nil {
			if a == p.opts.DataPlane {
				continue // said above
			}
			fail("-kind.load=%s: %v", a, err)
			continue
		}
		for _, t := range tags {
			have[t] = true
		}
	}
	needed, err := nodeimages.Needed(ctx, p.opts.Istio)
	if err != nil {
		fail("%v", err)
		return
	}
	var missing, stored []string
	for _, n := range needed {
		if have[n] {
			continue
		}
		present, err := p.docker.ImagePresent(ctx, n)
		switch {
		case err != nil:
			fail("image %s: docker image inspect failed: %v", n, err)
			return
		case present:
			stored = append(stored, n)
		default:
			missing = append(missing, n)
		}
	}
	p.store.Want(stored)
	switch {
	case p.opts.Registry:
		p.checkRegistry(ctx, stored, ok, fail)
	case len(stored) > 0:
		ok("images: %s are only in Docker's image store: saved into one archive when the first cluster starts and imported into every node, as kind load docker-image does", strings.Join(stored, ", "))
	}
	switch {
	case len(missing) > 0 && key != "":
		fail("images: %s are neither in the node image %s, the data plane's archive, a -kind.load archive, nor Docker's image store, and kubelet is never let pull: run `make images`, build or pull them into Docker, or -kind.load an archive that holds them", strings.Join(missing, ", "), image)
	case len(missing) > 0:
		ok("images: %s are not preloaded; kubelet will have to pull them", strings.Join(missing, ", "))
	default:
		ok("images: every image the run starts is in the node image, the data plane's archive, a -kind.load archive or Docker's image store (%d)", len(needed))
	}
}

// checkRegistry checks the registry image -kind.registry runs is built, and says what it will hold.
func (p *Provider) checkRegistry(ctx context.Context, stored []string, ok, fail func(string, ...any)) {
	image := p.opts.Built.Registry
	if present, err := p.docker.ImagePresent(ctx, image); err != nil || !present || image == "" {
		fail("-kind.registry: the registry image %q is not in Docker's image store (%v); run `make images`", image, err)
		return
	}
	ok("-kind.registry: %s on the run network, holding %s; every node pulls them through its containerd mirror", image, orNone(strings.Join(stored, ", ")))
}

func sysctl(name string) (int, error) {
	data, err := os.ReadFile(filepath.Join("/proc/sys", name))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}
