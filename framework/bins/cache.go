package bins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ambientmc/ambientmc/framework/gomod"
)

// Binary names one program the local provider runs.
type Binary string

const (
	KubeAPIServer         Binary = "kube-apiserver"
	KubeControllerManager Binary = "kube-controller-manager"
	Etcd                  Binary = "etcd"
	PilotDiscovery        Binary = "pilot-discovery"
)

// All lists every binary the local provider needs.
var All = []Binary{Etcd, KubeAPIServer, KubeControllerManager, PilotDiscovery}

// ClusterBinaries are what the local provider's clusters run; the istiod under test is chosen
// separately (-istiod.version, -istiod.binary), so a run never builds an istiod it won't use.
var ClusterBinaries = []Binary{Etcd, KubeAPIServer, KubeControllerManager}

// recipe says where a binary's source lives: a Go package built inside a module directory.
type recipe struct {
	moduleDir string // relative to the source root, or absolute (a generated istiod wrapper)
	pkg       string
	coldBuild time.Duration // measured on 2 cores; used to refuse a build that cannot finish in time
	// versionOf names a module whose version is stamped into the binary (see ldflags).
	versionOf string
	// tags are go build -tags (containerd's: leave out the snapshotters that need C headers).
	tags string
}

var recipes = map[Binary]recipe{
	KubeAPIServer:         {"scripts/kubebin", "k8s.io/kubernetes/cmd/kube-apiserver", 7 * time.Minute, "k8s.io/kubernetes", ""},
	KubeControllerManager: {"scripts/kubebin", "k8s.io/kubernetes/cmd/kube-controller-manager", 4 * time.Minute, "k8s.io/kubernetes", ""},
	Etcd:                  {"scripts/kubebin", "./etcd", time.Minute, "", ""},
	// The default istiod is built like any other version: through its wrapper module (istiod.go).
	PilotDiscovery: {"", pilotDiscoveryPkg, 5 * time.Minute, istioModule, ""},
}

// Cache builds binaries from the pinned sources of this repository and keeps them in Dir,
// keyed by the module files that pin them, the Go version and the platform.
type Cache struct {
	Dir     string    // cache root ($AMBIENTMC_CACHE, else the user cache dir + /ambientmc)
	SrcRoot string    // checkout of this repository (holds go.mod and scripts/kubebin)
	Log     io.Writer // progress

	recipes map[Binary]recipe // nil means the real ones; tests substitute small programs
}

func (c *Cache) recipe(b Binary) (recipe, error) {
	r, ok := recipes[b]
	if c.recipes != nil {
		r, ok = c.recipes[b]
	} else if n, node := nodeRecipes[b]; node {
		r, ok = n, true
	}
	if !ok {
		return recipe{}, fmt.Errorf("unknown binary %q", b)
	}
	if r.moduleDir == "" && r.versionOf == istioModule {
		// Built from the pinned istio.io/istio through its checked-in wrapper module.
		pinned, err := c.PinnedIstio()
		if err != nil {
			return recipe{}, err
		}
		w, err := c.checkedInIstiod(pinned)
		if err != nil {
			return recipe{}, err
		}
		r.moduleDir = w.moduleDir
	}
	return r, nil
}

// modDir is the recipe's module directory on disk.
func (c *Cache) modDir(r recipe) string {
	if filepath.IsAbs(r.moduleDir) {
		return r.moduleDir
	}
	return filepath.Join(c.SrcRoot, r.moduleDir)
}

// Default returns the cache at $AMBIENTMC_CACHE (or the user cache dir) for this checkout.
func Default() (*Cache, error) {
	dir, err := CacheDir()
	if err != nil {
		return nil, err
	}
	root, err := SourceRoot()
	if err != nil {
		return nil, err
	}
	return &Cache{Dir: dir, SrcRoot: root, Log: os.Stderr}, nil
}

// CacheDir is the cache's root: $AMBIENTMC_CACHE, else the user cache dir + /ambientmc.
func CacheDir() (string, error) {
	if dir := os.Getenv("AMBIENTMC_CACHE"); dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set AMBIENTMC_CACHE: %w", err)
	}
	return filepath.Join(base, "ambientmc"), nil
}

// SourceRoot finds this repository's checkout: $AMBIENTMC_SRC, else the directory this file was
// compiled from (suites always run from a checkout).
func SourceRoot() (string, error) {
	root := os.Getenv("AMBIENTMC_SRC")
	if root == "" {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			return "", errors.New("cannot locate the ambientmc source: set AMBIENTMC_SRC to the checkout")
		}
		root = filepath.Join(filepath.Dir(file), "..", "..")
	}
	if _, err := os.Stat(filepath.Join(root, "scripts", "kubebin", "go.mod")); err != nil {
		return "", fmt.Errorf("ambientmc source root %s has no scripts/kubebin/go.mod: set AMBIENTMC_SRC to the checkout", root)
	}
	return filepath.Clean(root), nil
}

// Path is where binary b is (or will be) cached.
func (c *Cache) Path(b Binary) (string, error) {
	r, err := c.recipe(b)
	if err != nil {
		return "", err
	}
	return c.pathOf(b, r)
}

func (c *Cache) pathOf(b Binary, r recipe) (string, error) {
	key, err := c.key(r)
	if err != nil {
		return "", err
	}
	return filepath.Join(c.Dir, string(b)+"-"+key, string(b)), nil
}

// key hashes what decides a binary's content: its module's go.mod and go.sum (so the version and
// every replace), Go, the platform and how the version is stamped.
func (c *Cache) key(r recipe) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(c.modDir(r), f))
		if err != nil {
			return "", fmt.Errorf("reading pinned sources: %w", err)
		}
		h.Write(data)
	}
	fmt.Fprintf(h, "%s %s %s %s %s", runtime.Version(), runtime.GOOS, runtime.GOARCH, r.pkg, r.versionOf)
	if r.tags != "" {
		fmt.Fprintf(h, " tags=%s", r.tags)
	}
	if r.versionOf == istioModule {
		h.Write([]byte(istioStampScheme))
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// Missing lists the binaries not yet in the cache.
func (c *Cache) Missing(bs ...Binary) ([]Binary, error) {
	var missing []Binary
	for _, b := range bs {
		p, err := c.Path(b)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, b)
		}
	}
	return missing, nil
}

// ColdBuildTime estimates how long building bs from nothing takes on 2 cores.
func ColdBuildTime(bs []Binary) time.Duration {
	var d time.Duration
	for _, b := range bs {
		d += recipes[b].coldBuild
	}
	return d
}

// Ensure returns the path of every binary, building the missing ones first. A file lock keeps
// parallel test binaries from building the same thing twice.
func (c *Cache) Ensure(ctx context.Context, bs ...Binary) (map[Binary]string, error) {
	paths := map[Binary]string{}
	missing, err := c.Missing(bs...)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		unlock, err := c.lock()
		if err != nil {
			return nil, err
		}
		defer unlock()
		// Another process may have built them while we waited for the lock.
		if missing, err = c.Missing(missing...); err != nil {
			return nil, err
		}
		// The binaries of one module with the same version stamp build in one go command, which
		// compiles their shared packages once and links them side by side: kube-apiserver and
		// kube-controller-manager took 21 s and 15 s one after the other from a warm Go cache.
		var groups []*buildGroup
		for _, b := range missing {
			r, err := c.recipe(b)
			if err != nil {
				return nil, err
			}
			ldflags, err := c.ldflags(ctx, r)
			if err != nil {
				return nil, err
			}
			i := slices.IndexFunc(groups, func(g *buildGroup) bool {
				return g.dir == c.modDir(r) && g.ldflags == ldflags && g.tags == r.tags
			})
			if i < 0 {
				groups = append(groups, &buildGroup{dir: c.modDir(r), ldflags: ldflags, tags: r.tags})
				i = len(groups) - 1
			}
			groups[i].bins, groups[i].recipes = append(groups[i].bins, b), append(groups[i].recipes, r)
		}
		for _, g := range groups {
			if err := c.build(ctx, g); err != nil {
				return nil, err
			}
		}
	}
	for _, b := range bs {
		if paths[b], err = c.Path(b); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

func (c *Cache) lock() (func(), error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("binary cache %s: %w", c.Dir, err)
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("binary cache lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(c.Log, "ambientmc: another process is building binaries in %s; waiting for it\n", c.Dir)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("binary cache lock: %w", err)
		}
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// ensureRecipe is Ensure for one binary whose recipe is not in the table (an istiod version).
func (c *Cache) ensureRecipe(ctx context.Context, b Binary, r recipe) (string, error) {
	dst, err := c.pathOf(b, r)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	unlock, err := c.lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	ldflags, err := c.ldflags(ctx, r)
	if err != nil {
		return "", err
	}
	return dst, c.build(ctx, &buildGroup{dir: c.modDir(r), ldflags: ldflags, tags: r.tags, bins: []Binary{b}, recipes: []recipe{r}})
}

// buildGroup is binaries built by one go command: same module directory, -ldflags and -tags.
type buildGroup struct {
	dir, ldflags, tags string
	bins               []Binary
	recipes            []recipe
}

func (c *Cache) build(ctx context.Context, g *buildGroup) error {
	var dsts, pkgs, names []string
	var cold time.Duration
	for i, b := range g.bins {
		dst, err := c.pathOf(b, g.recipes[i])
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		dsts, pkgs, names = append(dsts, dst), append(pkgs, g.recipes[i].pkg), append(names, string(b))
		cold += g.recipes[i].coldBuild
	}
	what := strings.Join(names, " and ")
	goBin, err := goTool()
	if err != nil {
		return fmt.Errorf("building %s: %w", what, err)
	}
	tmp, err := os.MkdirTemp(c.Dir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// -o to a directory: each main package's binary is named after its last path element.
	args := []string{"build", "-ldflags", g.ldflags}
	if g.tags != "" {
		args = append(args, "-tags", g.tags)
	}
	args = append(append(args, "-o", tmp+string(filepath.Separator)), pkgs...)
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = g.dir
	cmd.Env = goEnv()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	fmt.Fprintf(c.Log, "ambientmc: building %s from %s (cold: about %s on 2 cores) into %s\n", what, strings.Join(pkgs, ", "), cold, c.Dir)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("building %s: %w", what, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("building %s (go build %s in %s) failed: %w\n%s", what, strings.Join(pkgs, " "), cmd.Dir, err, out.String())
			}
			fmt.Fprintf(c.Log, "ambientmc: built %s in %s\n", what, time.Since(start).Round(time.Second))
			for i, dst := range dsts {
				if err := os.Rename(filepath.Join(tmp, path.Base(pkgs[i])), dst); err != nil {
					return fmt.Errorf("building %s: %w", names[i], err)
				}
			}
			return nil
		case <-tick.C:
			fmt.Fprintf(c.Log, "ambientmc: still building %s (%s elapsed)\n", what, time.Since(start).Round(time.Second))
		}
	}
}

// ldflags stamps the module version into the binary: `go build` of a module dependency leaves
// kube-apiserver at v0.0.0-master and pilot-discovery at "unknown", which their version output
// would then report.
func (c *Cache) ldflags(ctx context.Context, r recipe) (string, error) {
	if r.versionOf == "" {
		return "", nil
	}
	v, err := c.requiredVersion(r, r.versionOf)
	if err != nil {
		return "", err
	}
	if r.versionOf == istioModule {
		src, err := moduleSource(ctx, c.modDir(r), istioModule)
		if err != nil {
			return "", err
		}
		file, err := os.ReadFile(filepath.Join(src, "VERSION"))
		if err != nil {
			return "", fmt.Errorf("istio.io/istio@%s has no VERSION file: %w", v, err)
		}
		return istioLdflags(v, strings.TrimSpace(string(file))), nil
	}
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return "", fmt.Errorf("cannot stamp version %q of %s", v, r.versionOf)
	}
	const pkg = "k8s.io/component-base/version"
	return fmt.Sprintf("-X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=%[3]s -X %[1]s.gitMinor=%[4]s -X %[1]s.gitTreeState=clean",
		pkg, v, parts[0], parts[1]), nil
}

// requiredVersion reads the version of module that the recipe's go.mod requires.
func (c *Cache) requiredVersion(r recipe, module string) (string, error) {
	return gomod.Required(filepath.Join(c.modDir(r), "go.mod"), module)
}
