package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// emulatedDataPlane is this module's command that make images puts in place of Istio's ztunnel
// and proxyv2 images (ztunnel is Rust and the gateway Envoy: neither builds here). Istio's charts
// run it with their own arguments, environment and mounts.
const emulatedDataPlane = "./emulator/cmd/emulated-dataplane"

// dataPlaneKeys memoizes dataPlaneKey per checkout: go list takes a second, and a run asks for the
// images' names more than once.
var dataPlaneKeys sync.Map // srcRoot -> string

// dataPlaneKey hashes what the command is built from: every file of its packages in this module,
// and go.sum for the rest.
func dataPlaneKey(srcRoot string) (string, error) {
	if k, ok := dataPlaneKeys.Load(srcRoot); ok {
		return k.(string), nil
	}
	k, err := hashDataPlane(srcRoot)
	if err == nil {
		dataPlaneKeys.Store(srcRoot, k)
	}
	return k, err
}

func hashDataPlane(srcRoot string) (string, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`, emulatedDataPlane)
	cmd.Dir = srcRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("listing %s's sources: %w", emulatedDataPlane, errorOf(err))
	}
	h := sha256.New()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], srcRoot+string(filepath.Separator)) {
			continue // a module dependency: go.sum below pins it
		}
		for _, f := range fields[1:] {
			if err := hashFile(h, srcRoot, filepath.Join(fields[0], f)); err != nil {
				return "", err
			}
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := hashFile(h, srcRoot, filepath.Join(srcRoot, f)); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// hashFile hashes a file's path relative to the checkout (so every clone gives the same key) and
// its content.
func hashFile(h io.Writer, root, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return err
	}
	fmt.Fprintln(h, filepath.ToSlash(rel))
	_, err = io.Copy(h, f)
	return err
}

// buildDataPlane builds the command, static, into dir.
func (b *Builder) buildDataPlane(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "emulated-dataplane")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, emulatedDataPlane)
	cmd.Dir = b.Cache.SrcRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", emulatedDataPlane, err, msg)
	}
	return out, nil
}

// dataPlaneComponents are the ztunnel and proxyv2 images, each with the entrypoint's path and user
// Istio's Dockerfiles give theirs (the gateway's 1337), holding the emulated data plane over no
// base: one static binary under both names, in one layer both images share, and the directories
// the charts mount or write. They are a small archive of their own, loaded into the nodes when a
// cluster starts, so that changing the emulator rebuilds neither the node image nor its preload.
func dataPlaneComponents(s Set, bin string) []component {
	layer := component{files: []file{{bin, "/usr/local/bin/ztunnel"}}, links: []string{"/usr/local/bin/pilot-agent"},
		dirs: []dir{{"/tmp", 0o1777}, {"/etc", 0o755}, {"/var/run/ztunnel", 0o755}, {"/var/lib/istio/data", 0o755}}}
	zt, gw := layer, layer
	zt.refs, zt.entrypoint = []string{s.IstioHub + "/ztunnel:" + s.IstioTag}, []string{"/usr/local/bin/ztunnel"}
	gw.refs, gw.entrypoint, gw.user = []string{s.IstioHub + "/proxyv2:" + s.IstioTag}, []string{"/usr/local/bin/pilot-agent"}, "1337:1337"
	return []component{zt, gw}
}

// dataPlaneArchivePrefix names the data-plane archives in the images cache: one per key.
const dataPlaneArchivePrefix = "dataplane-"

// ensureDataPlane writes the data-plane archive of s unless it is there, removing those of other
// keys.
func (b *Builder) ensureDataPlane(ctx context.Context, s Set) error {
	if st, err := os.Stat(s.DataPlane); err == nil && st.Mode().IsRegular() {
		b.logf("%s is current (the emulated data plane as %s/ztunnel and proxyv2:%s)", filepath.Base(s.DataPlane), s.IstioHub, s.IstioTag)
		return nil
	}
	start := time.Now()
	dir := filepath.Dir(s.DataPlane)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin, err := b.buildDataPlane(ctx, dir)
	if err != nil {
		return err
	}
	if err := writeArchive(s.DataPlane, "", dataPlaneComponents(s, bin)); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, dataPlaneArchivePrefix+"*.tar"))
	for _, o := range old {
		if o != s.DataPlane {
			_ = os.Remove(o)
		}
	}
	b.logf("wrote %s in %s (%s): the emulated data plane, loaded into the nodes when a cluster starts", filepath.Base(s.DataPlane), time.Since(start).Round(time.Second), sizeOf(s.DataPlane))
	return nil
}

// errorOf adds a failed command's stderr to its error.
func errorOf(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
