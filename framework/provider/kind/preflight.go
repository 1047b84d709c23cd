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

	"github.com/ambientmc/ambientmc/framework/measure"
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
	if _, err := KubeadmAPIVersion(p.image()); err != nil {
		fail("%v", err)
	} else {
		for _, c := range t.Clusters {
			if _, err := Config(c, p.opts); err != nil {
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
	for _, a := range p.opts.Load {
		if st, err := os.Stat(a); err != nil || !st.Mode().IsRegular() {
			fail("-kind.load=%s: not a readable image archive file; write one with `docker image save --platform linux/amd64 -o %s IMAGE` (single-platform: kind's import fails on multi-platform archives from Docker's containerd store)", a, filepath.Base(a))
		}
	}

	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	version, err := p.docker.ServerVersion(dctx)
	switch {
	case errors.Is(err, ErrNoDockerCLI):
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

// checkDocker runs the checks that need a reachable Docker.
func (p *Provider) checkDocker(ctx context.Context, t *topology.Topology, ok, fail func(string, ...any)) {
	image := p.image()
	switch present, err := p.docker.ImagePresent(ctx, image); {
	case err != nil:
		fail("node image %s: docker image inspect failed: %v", image, err)
	case present:
		ok("node image %s: present", image)
	default:
		if err := p.docker.ImagePullable(ctx, image); err != nil {
			fail("node image %s: not present and not pullable (%v); `docker pull %s`, or pass -kind.image with an image you have", image, err, image)
		} else {
			ok("node image %s: not present, pullable (kind pulls it on the first create)", image)
		}
	}
	existing, err := p.kind.List()
	if err != nil {
		fail("kind: listing existing clusters failed: %v", err)
		return
	}
	for _, c := range t.Clusters {
		if name := KindName(c.Name); slices.Contains(existing, name) {
			fail("kind: a cluster named %s already exists (an earlier run with -keep?); delete it: kind delete cluster --name %s", name, name)
		}
	}
	// The pools come from the kind network's subnet, which Docker picks when the network is
	// created: create it now (as kind's first create would), so a network too small for N pools
	// fails here and not after every cluster was created.
	net, created, err := EnsureNetwork(ctx, p.docker)
	if err != nil {
		fail("docker network %s: %v", NetworkName(), err)
		return
	}
	how := "exists"
	if created {
		how = "created now as kind would create it; Docker chose the subnet"
	}
	maxIndex := 0
	for _, c := range t.Clusters {
		maxIndex = max(maxIndex, c.Index)
	}
	if err := checkPools(net, maxIndex); err != nil {
		fail("%v", err)
		return
	}
	ok("docker network %s (%s): subnet %s has room for the LoadBalancer pools of %d clusters", NetworkName(), how, net.Subnet, len(t.Clusters))
}

func sysctl(name string) (int, error) {
	data, err := os.ReadFile(filepath.Join("/proc/sys", name))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}
