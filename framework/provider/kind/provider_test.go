package kind

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/nodeimages"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/topology"
)

type fixture struct {
	p      *Provider
	kind   *fakeKind
	docker *fakeDocker
	lb     *lbRecorder
	log    *proc.LogBuffer
	dir    string
}

func newFixture(t *testing.T, mod func(*Options)) *fixture {
	t.Helper()
	f := &fixture{
		kind:   newFakeKind(t),
		docker: &fakeDocker{present: true, network: dockerhost.Network{Subnet: netip.MustParsePrefix(kindconfig.DefaultNetworkSubnet)}},
		lb:     &lbRecorder{},
		log:    &proc.LogBuffer{},
		dir:    filepath.Join(t.TempDir(), "clusters"),
	}
	o := Options{
		RunDir: f.dir, Log: f.log, Istio: install.Images{Hub: "registry.istio.io/testing", Tag: "1.31-dev"},
		Image: kindconfig.DefaultImage, Built: images.Set{Node: "ambientmc.local/kind-node:v1.36.1", Key: "k1", IstioHub: images.IstioHub, IstioTag: "t1"},
		Kind: f.kind, Docker: f.docker,
		// Never the real host's kernel settings: a directory stands in for /.
		HostRoot: t.TempDir(),
		Host: &Host{
			MemAvailable: func() (uint64, error) { return 64 << 30, nil },
			Sysctl:       func(string) (int, error) { return 1 << 20, nil },
		},
	}
	if mod != nil {
		mod(&o)
	}
	f.p = New(o)
	t.Cleanup(func() {
		for _, s := range f.docker.started {
			_ = s.Close()
		}
	})
	f.p.lb = f.lb.install
	f.p.reach = func(context.Context, string) error { return nil } // fake nodes have no API server
	t.Cleanup(func() { _ = f.p.Destroy(context.Background()) })
	return f
}

func generate(t *testing.T, n int) *topology.Topology {
	t.Helper()
	topo, err := topology.Generate(n)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestCreateStaysWithinParallelBoundFakeDocker(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Parallel = 3 })
	f.kind.delay = 60 * time.Millisecond
	cs, err := f.p.Create(context.Background(), generate(t, 8))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 8 || len(f.kind.creates) != 8 {
		t.Fatalf("%d clusters returned, %d kind creates; want 8 and 8", len(cs), len(f.kind.creates))
	}
	if f.kind.maxSeen != 3 {
		t.Errorf("at most %d creates ran at once, want exactly the bound 3", f.kind.maxSeen)
	}
	ports := map[int32]bool{}
	for name, cfg := range f.kind.clusters {
		if ports[cfg.Networking.APIServerPort] || cfg.Networking.APIServerPort == 0 {
			t.Errorf("%s: API server port %d is zero or shared", name, cfg.Networking.APIServerPort)
		}
		ports[cfg.Networking.APIServerPort] = true
	}
	for _, c := range cs {
		if !c.Runs.Controllers || !c.Runs.Scheduler {
			t.Errorf("%s: Runs %+v, want controllers and a scheduler", c.Name, c.Runs)
		}
		if c.KubernetesVersion != "v1.37.0" {
			t.Errorf("%s: version %q read from its API server", c.Name, c.KubernetesVersion)
		}
		want, _ := kindconfig.ServiceSubnet(c.Index)
		if c.Addresses.Services != want {
			t.Errorf("%s: Addresses.Services %s, want %s", c.Name, c.Addresses.Services, want)
		}
	}
}

func TestCreateWritesPrivateKubeconfigsFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	cs, err := f.p.Create(context.Background(), generate(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		kn := kindconfig.KindName(c.Name)
		for _, path := range []string{c.Kubeconfig, c.InternalKubeconfig} {
			if filepath.Dir(path) != filepath.Join(f.dir, c.Name) {
				t.Errorf("%s: kubeconfig %s outside the run directory's cluster dir", c.Name, path)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", path, st.Mode().Perm())
			}
		}
		// The run network is internal: the host, like every other cluster, reaches the API server
		// at the node's address (the fake nodes' address is the fake API server's, 127.0.0.1).
		in, err := clientcmd.LoadFromFile(c.InternalKubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		port := f.kind.server.URL[strings.LastIndexByte(f.kind.server.URL, ':')+1:]
		want := "https://" + f.kind.nodes[kn].ip + ":" + port
		if got := in.Clusters["kind-"+kn].Server; got != want {
			t.Errorf("%s: internal server %s, want the node container IP %s", c.Name, got, want)
		}
		ext, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if got := ext.Clusters["kind-"+kn].Server; got != want {
			t.Errorf("%s: host kubeconfig's server %s, want the node container IP %s (kind's 127.0.0.1 port does not answer on an internal network)", c.Name, got, want)
		}
	}
	if home, err := os.UserHomeDir(); err == nil && strings.Contains(strings.Join(f.kind.deleteKubeconfigs, ","), filepath.Join(home, ".kube")) {
		t.Error("a kubeconfig under ~/.kube was used")
	}
}

func TestCreateFailingPartwayDeletesWhatItMadeFakeDocker(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Parallel = 2 })
	f.kind.failCreate["ambientmc-cluster-3"] = true
	_, err := f.p.Create(context.Background(), generate(t, 4))
	if err == nil {
		t.Fatal("Create succeeded although cluster-3 failed")
	}
	if !strings.Contains(err.Error(), "cluster cluster-3") || !strings.Contains(err.Error(), filepath.Join(f.dir, "logs")) {
		t.Errorf("error does not name the cluster and the logs: %v", err)
	}
	if n := f.kind.alive(); n != 0 {
		t.Errorf("%d clusters left after the failed create", n)
	}
	for _, name := range f.kind.creates {
		if !slices.Contains(f.kind.deletes, name) {
			t.Errorf("%s was created (or attempted) but not deleted", name)
		}
		if _, err := os.Stat(filepath.Join(f.dir, "logs", name, "kind-version.txt")); err != nil {
			t.Errorf("no kind logs for %s in the run dir: %v", name, err)
		}
	}
	deletes := len(f.kind.deletes)
	if err := f.p.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.kind.deletes) != deletes {
		t.Errorf("Destroy after the failed create deleted again: %v", f.kind.deletes)
	}
}

func TestDestroyIsIdempotentFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.p.Create(context.Background(), generate(t, 3)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := f.p.Destroy(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.kind.deletes) != 3 || f.kind.alive() != 0 {
		t.Errorf("deletes %v, %d alive; want each of 3 clusters deleted once", f.kind.deletes, f.kind.alive())
	}
	for i, kc := range f.kind.deleteKubeconfigs {
		if want := f.p.KubeconfigPath(strings.TrimPrefix(f.kind.deletes[i], kindconfig.NamePrefix)); kc != want {
			t.Errorf("delete of %s used kubeconfig %q, want its own %s", f.kind.deletes[i], kc, want)
		}
	}
	// A provider that never created anything destroys cleanly too.
	if err := newFixture(t, nil).p.Destroy(context.Background()); err != nil {
		t.Error(err)
	}
}

// A node that will not die because a pod's cgroup is frozen (runc on cgroup v1, killed mid-update)
// is thawed and deleted again; without a frozen cgroup the failure stands and nothing is retried.
func TestDestroyThawsANodeThatWillNotDieFakeDocker(t *testing.T) {
	root, frozen := frozenCgroup(t, "id-2")
	f := newFixture(t, func(o *Options) { o.FreezerRoot = root })
	f.kind.stuck = map[string]bool{"ambientmc-cluster-2": true}
	f.kind.thawed = frozen
	f.docker.containers = map[string][]string{"ambientmc-cluster-2": {"id-2"}}
	_, err := f.p.Create(context.Background(), generate(t, 2))
	require.NoError(t, err)
	require.NoError(t, f.p.Destroy(context.Background()))
	assert.Equal(t, 0, f.kind.alive())
	n := 0
	for _, d := range f.kind.deletes {
		if d == "ambientmc-cluster-2" {
			n++
		}
	}
	assert.Equal(t, 2, n, "cluster-2 deleted, thawed, deleted again: %v", f.kind.deletes)
	assert.Contains(t, f.log.String(), "thawed them and deleting again: "+frozen)

	g := newFixture(t, func(o *Options) { o.FreezerRoot = t.TempDir() })
	g.kind.stuck = map[string]bool{"ambientmc-cluster-1": true}
	g.kind.thawed = t.TempDir()
	_, err = g.p.Create(context.Background(), generate(t, 1))
	require.NoError(t, err)
	err = g.p.Destroy(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "docker rm -f -v ambientmc-cluster-1-control-plane")
	assert.Equal(t, []string{"ambientmc-cluster-1"}, g.kind.deletes, "nothing thawed: no second delete")
}

// frozenCgroup makes a freezer hierarchy in which container id has a FROZEN pod cgroup, as runc
// leaves one on cgroup v1, and returns the hierarchy's root and the cgroup.
func frozenCgroup(t *testing.T, id string) (root, frozen string) {
	root = t.TempDir()
	frozen = filepath.Join(root, "docker", id, "kubelet.slice", "pod-a")
	require.NoError(t, os.MkdirAll(frozen, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(frozen, "freezer.state"), []byte("FROZEN\n"), 0o644))
	return root, frozen
}

// The second Ctrl-C's kill removes every cluster's containers through Docker at once, thawing a
// node whose frozen cgroup made the first removal fail and removing it again, and the run network.
func TestKillNowRemovesContainersAndThawsFakeDocker(t *testing.T) {
	root, frozen := frozenCgroup(t, "id-2")
	f := newFixture(t, func(o *Options) { o.FreezerRoot = root })
	f.docker.containers = map[string][]string{"ambientmc-cluster-1": {"id-1"}, "ambientmc-cluster-2": {"id-2"}}
	f.docker.stuck = map[string]string{"id-2": frozen}
	_, err := f.p.Create(context.Background(), generate(t, 2))
	require.NoError(t, err)
	removedNetworks := len(f.docker.removed)
	f.p.killNow()
	assert.ElementsMatch(t, []string{"id-1", "id-2"}, f.docker.removedContainers, "every container removed once the frozen node thawed")
	assert.Equal(t, 3, f.docker.rmCalls, "cluster-1 removed at once; cluster-2 failed, was thawed and removed again")
	assert.Greater(t, len(f.docker.removed), removedNetworks, "the run network removed")
}

func TestDeadlineDeletesClustersFakeDocker(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Deadline = time.Now().Add(300 * time.Millisecond) })
	if _, err := f.p.Create(context.Background(), generate(t, 2)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.kind.alive() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if f.kind.alive() != 0 {
		t.Error("clusters still alive after the deadline")
	}
}

func TestLoadBalancerPoolsPerClusterFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	f.docker.network = dockerhost.Network{Subnet: netip.MustParsePrefix("172.19.0.0/16")}
	cs, err := f.p.Create(context.Background(), generate(t, 12))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Prefix]string{}
	for _, c := range cs {
		pool, ok := f.lb.pools[c.Name]
		if !ok {
			t.Fatalf("%s got no MetalLB pool", c.Name)
		}
		if !f.docker.network.Subnet.Contains(pool.Addr()) {
			t.Errorf("%s: pool %s outside the kind network %s", c.Name, pool, f.docker.network.Subnet)
		}
		if other, dup := seen[pool]; dup {
			t.Errorf("%s and %s share pool %s", c.Name, other, pool)
		}
		seen[pool] = c.Name
	}
}

// The data plane's archive, then each -kind.load archive, into every node.
func TestLoadArchivesIntoEveryNodeFakeDocker(t *testing.T) {
	dir := t.TempDir()
	archive, dataPlane := filepath.Join(dir, "pilot.tar"), filepath.Join(dir, "dataplane.tar")
	for path, data := range map[string]string{archive: "image archive bytes", dataPlane: "data plane bytes"} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, func(o *Options) { o.Load, o.DataPlane = []string{archive}, dataPlane })
	if _, err := f.p.Create(context.Background(), generate(t, 2)); err != nil {
		t.Fatal(err)
	}
	for name, n := range f.kind.nodes {
		if len(n.imported) != 2 || string(n.imported[0]) != "data plane bytes" || string(n.imported[1]) != "image archive bytes" {
			t.Errorf("%s: imported %q, want the data plane's archive, then -kind.load's", name, n.imported)
		}
	}
}

// Images only in Docker's image store (a user's own -istio.hub/-istio.tag build) go into every
// node without -kind.load, saved once, as kind load docker-image does; one in neither is named
// before anything starts.
func TestImagesOnlyInDockersStoreAreImportedFakeDocker(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Istio = install.Images{Hub: "example.com/me", Tag: "dev"} })
	f.docker.label = "guarded" // a guarded node image that preloads none of them: kubelet may not pull
	needed, err := nodeimages.Needed(context.Background(), f.p.opts.Istio)
	require.NoError(t, err)
	f.docker.stored = map[string]bool{}
	for _, n := range needed {
		f.docker.stored[n] = n != "example.com/me/ztunnel:dev"
	}
	err = f.p.Preflight(context.Background(), generate(t, 2))
	require.ErrorContains(t, err, "images: example.com/me/ztunnel:dev are neither in the node image")
	require.ErrorContains(t, err, "nor Docker's image store")

	f.docker.stored["example.com/me/ztunnel:dev"] = true
	f.docker.label = "" // the fake's nodes have no guard to check
	require.NoError(t, f.p.Preflight(context.Background(), generate(t, 2)))
	require.Contains(t, f.log.String(), "are only in Docker's image store")
	_, err = f.p.Create(context.Background(), generate(t, 2))
	require.NoError(t, err)
	require.Len(t, f.docker.saved, 1, "saved once for every cluster")
	require.ElementsMatch(t, needed, f.docker.saved[0])
	require.Len(t, f.kind.nodes, 2)
	archive := filepath.Join(f.dir, "images-from-docker.tar")
	saved, err := os.ReadFile(archive)
	require.NoError(t, err)
	for name, n := range f.kind.nodes {
		require.Len(t, n.imported, 1, name)
		require.Equal(t, saved, n.imported[0], name)
	}
	require.NoError(t, f.p.Destroy(context.Background()))
	require.NoFileExists(t, archive, "Destroy removes the saved archive")
}

// With -kind.registry the images only Docker's image store holds are pushed into the run's
// registry, once, and every node's containerd gets a mirror for their host instead of an import.
func TestRegistryHoldsTheImagesOnlyInDockersStoreFakeDocker(t *testing.T) {
	f := newFixture(t, func(o *Options) {
		o.Istio, o.Registry = install.Images{Hub: "example.com/me", Tag: "dev"}, true
		o.Built.Registry = "ambientmc.local/registry:0123"
	})
	needed, err := nodeimages.Needed(context.Background(), f.p.opts.Istio)
	require.NoError(t, err)
	require.NoError(t, f.p.Preflight(context.Background(), generate(t, 2)))
	require.Contains(t, f.log.String(), "-kind.registry: ambientmc.local/registry:0123 on the run network, holding")
	_, err = f.p.Create(context.Background(), generate(t, 2))
	require.NoError(t, err)
	require.Len(t, f.docker.saved, 1)
	r := f.p.registry
	for _, ref := range needed {
		dst, err := r.Tag(ref)
		require.NoError(t, err)
		_, err = remote.Head(dst)
		require.NoError(t, err, "%s is in the registry", ref)
	}
	for name, n := range f.kind.nodes {
		require.Empty(t, n.imported, "%s imported what the registry serves", name)
		require.Len(t, n.mirrors, 1, name)
		for _, host := range []string{"example.com", "docker.io", "registry.istio.io"} {
			require.Contains(t, n.mirrors[0], "/etc/containerd/certs.d/"+host+" ", name)
		}
		require.Contains(t, n.mirrors[0], `server = "http://`+r.Addr.String()+`"`, name)
	}
	require.NoFileExists(t, filepath.Join(f.dir, "images-from-docker.tar"), "the pushed archive is gone")
}

func TestPreflightFakeDocker(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		mod   func(*fixture)
		opts  func(*Options)
		want  []string // substrings of the error; nil means success
		lines int      // lines the error has
	}{
		{name: "ok", n: 10},
		{name: "docker unreachable", n: 2, mod: func(f *fixture) {
			f.docker.versionErr = errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
		}, want: []string{"Docker daemon is not reachable", "start it", "-provider=local"}, lines: 1},
		{name: "no docker CLI", n: 2, mod: func(f *fixture) { f.docker.versionErr = dockerhost.ErrNoDockerCLI },
			want: []string{"docker CLI is not on PATH", "install Docker"}, lines: 1},
		{name: "image not built", n: 2, mod: func(f *fixture) { f.docker.present = false },
			opts: func(o *Options) { o.Image = "" },
			want: []string{"node image ambientmc.local/kind-node:v1.36.1: not built; run `make images`"}, lines: 1},
		{name: "image given, missing", n: 2, mod: func(f *fixture) { f.docker.present = false },
			want: []string{"(-kind.image): not in Docker's image store, and a run never pulls"}, lines: 1},
		{name: "image stale", n: 2, mod: func(f *fixture) { f.docker.label = "old" },
			opts: func(o *Options) { o.Image = "" },
			want: []string{"was built from other sources", "run `make images`"}, lines: 1},
		{name: "inotify too low", n: 4, mod: func(f *fixture) {
			f.p.host.Sysctl = func(name string) (int, error) {
				if strings.HasSuffix(name, "instances") {
					return 128, nil
				}
				return 524288, nil
			}
		}, want: []string{"max_user_instances=128", "4 kind clusters", "sudo sysctl fs.inotify.max_user_instances=512"}, lines: 1},
		{name: "memory too low", n: 10, mod: func(f *fixture) {
			f.p.host.MemAvailable = func() (uint64, error) { return 8 << 30, nil }
		}, want: []string{"memory: 10 kind clusters", "16.1 GB", "8.6 GB available"}, lines: 1},
		{name: "data plane archive missing", n: 2, opts: func(o *Options) { o.DataPlane = filepath.Join(t.TempDir(), "dataplane-0123.tar") },
			want: []string{"the emulated data plane's images", "dataplane-0123.tar is not there", "run `make images`"}, lines: 1},
		{name: "cluster exists", n: 2, mod: func(f *fixture) { f.kind.existing = []string{"ambientmc-cluster-2"} },
			want: []string{"ambientmc-cluster-2 already exists", "kind delete cluster --name ambientmc-cluster-2"}, lines: 1},
		{name: "no istio images", n: 2, opts: func(o *Options) { o.Istio = install.Images{} },
			want: []string{"-istio.hub and -istio.tag are required"}, lines: 1},
		{name: "bad image tag", n: 2, opts: func(o *Options) { o.Image = "kindest/node:latest" },
			want: []string{"-kind.image=kindest/node:latest"}, lines: 1},
		{name: "two problems", n: 2, opts: func(o *Options) { o.Istio = install.Images{} }, mod: func(f *fixture) { f.docker.versionErr = errors.New("refused") },
			want: []string{"-istio.hub", "Docker daemon"}, lines: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.opts)
			if tc.mod != nil {
				tc.mod(f)
			}
			err := f.p.Preflight(context.Background(), generate(t, tc.n))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("preflight passed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != tc.lines {
				t.Errorf("error has %d lines, want %d:\n%v", got, tc.lines, err)
			}
			if len(f.kind.creates) != 0 {
				t.Error("preflight created clusters")
			}
			if _, err := os.Stat(f.dir); !os.IsNotExist(err) {
				t.Errorf("preflight left the run directory %s behind", f.dir)
			}
		})
	}
}

func TestCollectLogsOfLiveClustersFakeDocker(t *testing.T) {
	f := newFixture(t, nil)
	if got := f.p.CollectLogs(); got != "" {
		t.Errorf("logs collected before any cluster existed: %s", got)
	}
	if _, err := f.p.Create(context.Background(), generate(t, 2)); err != nil {
		t.Fatal(err)
	}
	dir := f.p.CollectLogs()
	for _, n := range []string{"ambientmc-cluster-1", "ambientmc-cluster-2"} {
		if _, err := os.Stat(filepath.Join(dir, n, "kind-version.txt")); err != nil {
			t.Errorf("no logs of %s under %s: %v", n, dir, err)
		}
	}
	if filepath.Dir(dir) != f.dir {
		t.Errorf("logs in %s, not in the run directory %s", dir, f.dir)
	}
}
