package images

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
)

// Builder builds the images of a kind run.
type Builder struct {
	Cache *bins.Cache
	Log   io.Writer
}

func (b *Builder) logf(f string, a ...any) { fmt.Fprintf(b.Log, "images: "+f+"\n", a...) }

// run runs a command, returning its output in the error when it fails.
func (b *Builder) run(ctx context.Context, name string, args ...string) error {
	_, err := b.output(ctx, nil, name, args...)
	return err
}

func (b *Builder) output(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String() + "\n" + out.String())
		if lines := strings.Split(msg, "\n"); len(lines) > 20 {
			msg = strings.Join(lines[len(lines)-20:], "\n")
		}
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, msg)
	}
	return out.String(), nil
}

// Current reports whether the node image of s is in Docker's image store and was built from
// s.Key.
func Current(ctx context.Context, s Set) (bool, error) {
	out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{index .Config.Labels \""+KeyLabel+"\"}}", s.Node).CombinedOutput()
	if err != nil {
		if strings.Contains(strings.ToLower(string(out)), "no such image") {
			return false, nil
		}
		return false, fmt.Errorf("docker image inspect %s: %v: %s", s.Node, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)) == s.Key, nil
}

// Build builds whatever of the set is not current and returns it.
func (b *Builder) Build(ctx context.Context) (Set, error) {
	start := time.Now()
	s, err := Expected(b.Cache)
	if err != nil {
		return s, err
	}
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return s, fmt.Errorf("no Docker engine answers (%s): run `make engine` first", strings.TrimSpace(string(out)))
	}
	if err := b.ensureDataPlane(ctx, s); err != nil {
		return s, err
	}
	if err := b.ensureRegistry(ctx, s); err != nil {
		return s, err
	}
	if ok, err := Current(ctx, s); err != nil {
		return s, err
	} else if ok {
		b.logf("%s is current (key %s); Istio images %s/*:%s inside it", s.Node, s.Key, s.IstioHub, s.IstioTag)
		return s, nil
	}
	dir := filepath.Join(b.Cache.Dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return s, err
	}
	rootfs, err := b.rootfsTar(ctx, dir)
	if err != nil {
		return s, err
	}
	paths, err := b.Cache.Ensure(ctx, append(append([]bins.Binary{}, bins.NodeBinaries...), bins.PilotDiscovery)...)
	if err != nil {
		return s, err
	}
	comps, err := b.components(ctx, s, paths)
	if err != nil {
		return s, err
	}
	archive := filepath.Join(dir, "preload-"+s.Key+".tar")
	t := time.Now()
	if err := writeArchive(archive, rootfs, comps); err != nil {
		return s, err
	}
	defer os.Remove(archive)
	b.logf("wrote %d images for preloading in %s (%s)", len(comps), time.Since(t).Round(time.Second), sizeOf(archive))
	var preloaded []string
	for _, c := range comps {
		preloaded = append(preloaded, c.refs...)
	}
	old, _ := b.output(ctx, nil, "docker", "image", "inspect", "--format", "{{.Id}}", s.Node)
	if err := b.node(ctx, s, rootfs, archive, preloaded, paths); err != nil {
		return s, err
	}
	// The image this one replaces would be left untagged, 1.2 GB each time (kept while in use).
	cur, _ := b.output(ctx, nil, "docker", "image", "inspect", "--format", "{{.Id}}", s.Node)
	if old = strings.TrimSpace(old); old != "" && old != strings.TrimSpace(cur) {
		_ = b.run(ctx, "docker", "rmi", old)
	}
	b.logf("built %s in %s (key %s)", s.Node, time.Since(start).Round(time.Second), s.Key)
	return s, nil
}

// components are the images preloaded into the node: what kubeadm asks for, MetalLB as the
// pinned Istio's manifest names it, Istio's pilot and install-cni, and the probes' fortio.
func (b *Builder) components(ctx context.Context, s Set, paths map[bins.Binary]string) ([]component, error) {
	out, err := b.output(ctx, nil, paths[bins.Kubeadm], "config", "images", "list", "--kubernetes-version", s.Kubernetes)
	if err != nil {
		return nil, fmt.Errorf("asking kubeadm which images it needs: %w", err)
	}
	bin := func(name string) (bins.Binary, string, []string) {
		switch name {
		case "coredns":
			return bins.CoreDNS, "/coredns", []string{"/coredns"}
		case "pause":
			return bins.Pause, "/pause", []string{"/pause"}
		}
		p := "/usr/local/bin/" + name
		return bins.Binary(name), p, []string{p}
	}
	var comps []component
	for _, ref := range strings.Fields(out) {
		repo := ref[:strings.LastIndexByte(ref, ':')]
		b, p, ep := bin(filepath.Base(repo))
		if paths[b] == "" {
			return nil, fmt.Errorf("kubeadm %s asks for %s, which make images does not build", s.Kubernetes, ref)
		}
		refs := []string{ref}
		if b == bins.Pause {
			// kind's containerd configuration names its own sandbox image.
			refs = append(refs, repo+":3.10")
		}
		comps = append(comps, component{refs: refs, files: []file{{paths[b], p}}, entrypoint: ep})
	}
	metallb, err := b.metallbImages(ctx)
	if err != nil {
		return nil, err
	}
	for _, ref := range metallb {
		name := filepath.Base(ref[:strings.LastIndexByte(ref, ':')])
		b := map[string]bins.Binary{"controller": bins.MetalLBCtl, "speaker": bins.MetalLBSpeaker}[name]
		if b == "" {
			return nil, fmt.Errorf("MetalLB's manifest names %s, which make images does not build", ref)
		}
		comps = append(comps, component{refs: []string{ref}, files: []file{{paths[b], "/" + name}}, entrypoint: []string{"/" + name}})
	}
	comps = append(comps, istioComponents(s, paths)...)
	fortio := "/usr/bin/fortio"
	comps = append(comps, component{refs: []string{s.Probe}, files: []file{{paths[bins.Fortio], fortio}}, entrypoint: []string{fortio}})
	return comps, nil
}

// istioComponents are Istio's pilot and install-cni images, named s.IstioHub/<image>:s.IstioTag.
func istioComponents(s Set, paths map[bins.Binary]string) []component {
	pilot := "/usr/local/bin/pilot-discovery"
	// install-cni as Istio's Dockerfile.install-cni lays it out: the plugin in /opt/cni/bin, the
	// installer (also the node agent) as the command.
	installCNI := "/usr/local/bin/install-cni"
	return []component{
		// Istio's pilot image runs as 1337 (its chart sets runAsNonRoot).
		{refs: []string{s.IstioHub + "/pilot:" + s.IstioTag}, files: []file{{paths[bins.PilotDiscovery], pilot}}, entrypoint: []string{pilot}, user: "1337:1337"},
		{refs: []string{s.IstioHub + "/install-cni:" + s.IstioTag}, files: []file{{paths[bins.IstioCNI], "/opt/cni/bin/istio-cni"}, {paths[bins.InstallCNI], installCNI}},
			entrypoint: []string{installCNI}, workdir: "/opt/cni/bin"},
	}
}

// AsUserBuild writes the Istio images make images builds (pilot and install-cni as the node
// preloads them, the emulated data plane's ztunnel and proxyv2) into one docker archive at out,
// named hub/<image>:tag as a user's own Istio build names them: offline, the stand-in for a
// user's images, for Docker's image store (docker load) or a registry. Every image holds the
// node's root filesystem as its base layer (stored once).
func (b *Builder) AsUserBuild(ctx context.Context, hub, tag, out string) error {
	s, err := Expected(b.Cache)
	if err != nil {
		return err
	}
	dir := filepath.Join(b.Cache.Dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rootfs, err := b.rootfsTar(ctx, dir)
	if err != nil {
		return err
	}
	paths, err := b.Cache.Ensure(ctx, bins.PilotDiscovery, bins.IstioCNI, bins.InstallCNI)
	if err != nil {
		return err
	}
	bin, err := b.buildDataPlane(ctx, dir)
	if err != nil {
		return err
	}
	s.IstioHub, s.IstioTag = hub, tag
	return writeArchive(out, rootfs, append(istioComponents(s, paths), dataPlaneComponents(s, bin)...))
}

// metallbManifest is MetalLB's install manifest as the pinned Istio module ships it (images
// registry.istio.io/testing/metallb/{controller,speaker}); it is read from the module cache, never
// copied into this repository.
const metallbManifest = "common/scripts/metallb-native.yaml"

// MetalLBManifestPath returns the path of metallb-native.yaml in the pinned istio.io/istio module.
func MetalLBManifestPath(ctx context.Context, c *bins.Cache) (string, error) {
	src, err := c.ModuleSource(ctx, "istio.io/istio")
	if err != nil {
		return "", err
	}
	path := filepath.Join(src, metallbManifest)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("MetalLB manifest: %w (the pinned istio.io/istio module should ship %s)", err, metallbManifest)
	}
	return path, nil
}

// metallbImages are the images MetalLB's manifest names.
func (b *Builder) metallbImages(ctx context.Context) ([]string, error) {
	path, err := MetalLBManifestPath(ctx, b.Cache)
	if err != nil {
		return nil, err
	}
	return ManifestImages(path)
}

// ManifestImages are the images a YAML manifest names, each once.
func ManifestImages(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image:"); ok {
			if ref := strings.TrimSpace(v); !slices.Contains(out, ref) {
				out = append(out, ref)
			}
		}
	}
	return out, nil
}

// node lays out and commits the node image: kind's base files from the sigs.k8s.io/kind module
// (entrypoint patched by kindFiles), the binaries, then the preloaded images, then STOPSIGNAL.
func (b *Builder) node(ctx context.Context, s Set, rootfs, archive string, preloaded []string, paths map[bins.Binary]string) error {
	t := time.Now()
	base := "ambientmc.local/kind-base:" + strings.TrimSuffix(strings.TrimPrefix(filepath.Base(rootfs), "rootfs-"), ".tar")
	if ok, _ := Current(ctx, Set{Node: base, Key: ""}); !ok {
		if err := b.run(ctx, "docker", "import", rootfs, base); err != nil {
			return err
		}
	}
	stage, err := os.MkdirTemp(filepath.Dir(archive), ".node-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := b.stage(ctx, stage, s, paths); err != nil {
		return err
	}
	ctr := "ambientmc-image-build-" + strconv.Itoa(os.Getpid())
	defer func() { _ = exec.Command("docker", "rm", "-f", ctr).Run() }()
	steps := [][]string{
		{"run", "-d", "--privileged", "--name", ctr, "--network", "none", "--entrypoint", "sleep", base, "infinity"},
		{"cp", stage + "/.", ctr + ":/"},
		{"cp", archive, ctr + ":/tmp/images.tar"},
		{"exec", ctr, "bash", "/tmp/build-node.sh"},
		{"commit", "--change", `ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]`, "--change", "ENV container=docker", ctr, s.Node + "-unsigned"},
	}
	for _, args := range steps {
		if err := b.run(ctx, "docker", args...); err != nil {
			return err
		}
	}
	// docker commit cannot set STOPSIGNAL; a build from the local image can, offline.
	dockerfile := fmt.Sprintf("FROM %s-unsigned\nSTOPSIGNAL SIGRTMIN+3\nLABEL %s=%s %s=%s\n", s.Node, KeyLabel, s.Key, PreloadLabel, strings.Join(preloaded, ","))
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-t", s.Node, "-")
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	cmd.Stdin = strings.NewReader(dockerfile)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker build of %s: %v: %s", s.Node, err, out)
	}
	_ = b.run(ctx, "docker", "rmi", s.Node+"-unsigned")
	b.logf("node image laid out, preloaded and committed in %s", time.Since(t).Round(time.Second))
	return nil
}
