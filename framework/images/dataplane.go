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
)

// emulatedDataPlane is this module's command that make images puts in place of Istio's ztunnel
// and proxyv2 images (ztunnel is Rust and the gateway Envoy: neither builds here). Istio's charts
// run it with their own arguments, environment and mounts.
const emulatedDataPlane = "./cmd/emulated-dataplane"

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

// dataPlaneComponents are the ztunnel and proxyv2 images, laid out as Istio's Dockerfiles lay
// theirs (the entrypoint's path, the gateway's user 1337), holding the emulated data plane.
func dataPlaneComponents(s Set, bin string) []component {
	return []component{
		{refs: []string{s.IstioHub + "/ztunnel:" + s.IstioTag}, files: []file{{bin, "/usr/local/bin/ztunnel"}}, entrypoint: []string{"/usr/local/bin/ztunnel"}},
		{refs: []string{s.IstioHub + "/proxyv2:" + s.IstioTag}, files: []file{{bin, "/usr/local/bin/pilot-agent"}}, entrypoint: []string{"/usr/local/bin/pilot-agent"}, user: "1337:1337"},
	}
}

// errorOf adds a failed command's stderr to its error.
func errorOf(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
