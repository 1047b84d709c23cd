package bins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
)

// CheckIstiod runs the fast checks on s before anything starts: a version must be one the module
// proxy serves (or have a checked-in wrapper), a binary must exist and run as pilot-discovery.
func (c *Cache) CheckIstiod(ctx context.Context, s IstiodSpec) error {
	switch {
	case s.Version != "" && s.Binary != "":
		return errors.New("istiod: a version and a binary were both given; choose one")
	case s.Binary != "":
		_, err := checkPilotDiscovery(ctx, s.Binary)
		return err
	case s.Version != "" && !c.hasCheckedIn(s.Version):
		return CheckIstioVersion(ctx, s.Version)
	}
	return nil
}

// CheckIstioVersion asks the module proxy (go list -m) whether it serves istio.io/istio@version.
// Queries such as "latest" or a branch name are refused: a cache entry must name a fixed version.
func CheckIstioVersion(ctx context.Context, version string) error {
	if !strings.HasPrefix(version, "v") || strings.ContainsAny(version, " /@") {
		return fmt.Errorf("istio.io/istio version %q is not a module version (e.g. v0.0.0-20260827124520-eed52ebb66ad)", version)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := goCmd(ctx, os.TempDir(), "list", "-m", "-json", istioModule+"@"+version)
	if err != nil {
		if m := regexp.MustCompile(`(?m)^go: .*$`).FindString(out); m != "" {
			out = m
		}
		return fmt.Errorf("istio.io/istio %s is not served by the module proxy (GOPROXY=%s): %s", version, goEnvValue("GOPROXY"), strings.TrimSpace(out))
	}
	var info struct{ Version string }
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return fmt.Errorf("go list -m istio.io/istio@%s: %w", version, err)
	}
	if info.Version != version {
		return fmt.Errorf("istio.io/istio %s resolves to %s: give that version itself", version, info.Version)
	}
	return nil
}

// checkPilotDiscovery makes sure path is an executable that runs as pilot-discovery: its `version`
// prints Istio's BuildInfo and it has the `discovery` command (istioctl and pilot-agent do not).
// It returns the version output.
func checkPilotDiscovery(ctx context.Context, path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("istiod binary %s: %w", path, err)
	}
	if !info.Mode().IsRegular() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("istiod binary %s is not an executable file (chmod +x it, or give the pilot-discovery you built)", path)
	}
	version, err := versionOutput(ctx, path)
	if err != nil {
		return "", err
	}
	if out, err := run(ctx, path, "discovery", "--help"); err != nil || !strings.Contains(out, "discovery") {
		return "", fmt.Errorf("istiod binary %s has no `discovery` command, so it is not pilot-discovery (build istio.io/istio/pilot/cmd/pilot-discovery)", path)
	}
	return version, nil
}

func versionOutput(ctx context.Context, path string) (string, error) {
	out, err := run(ctx, path, "version")
	if err != nil || !strings.Contains(out, "version.BuildInfo{") {
		return "", fmt.Errorf("istiod binary %s does not run as pilot-discovery: `%s version` printed %q (%v); give a pilot-discovery binary",
			path, filepath.Base(path), firstLine(out), err)
	}
	// Keep Istio's line only: the binary also logs (automemlimit) to the same output.
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "version.BuildInfo{") {
			return strings.TrimSpace(l), nil
		}
	}
	return strings.TrimSpace(out), nil
}

func run(ctx context.Context, path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// InspectIstiod checks path runs as pilot-discovery and describes it: sha256, version output and
// debug/buildinfo (from which the istio.io/istio version and source dir come, when it names one).
func InspectIstiod(ctx context.Context, path string) (*IstiodBuild, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	b := &IstiodBuild{Path: abs}
	if b.VersionOutput, err = checkPilotDiscovery(ctx, abs); err != nil {
		return nil, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	b.SHA256 = hex.EncodeToString(h.Sum(nil))
	if info, err := buildinfo.ReadFile(abs); err == nil {
		b.GoVersion = info.GoVersion
		b.BuildInfo = info.String()
		// go build of the main package from a wrapper records istio.io/istio as the main module;
		// a build from a developer's checkout says "(devel)", which names no version.
		for _, m := range append([]*debug.Module{&info.Main}, info.Deps...) {
			if m.Path == istioModule && m.Replace == nil && strings.HasPrefix(m.Version, "v") {
				b.ModuleVersion = m.Version
			}
			// As linked; Istiod replaces this with the pins from the wrapper's go.mod.
			if r := m.Replace; r != nil {
				b.ReplacedPins = append(b.ReplacedPins, fmt.Sprintf("%s %s => %s", m.Path, m.Version, strings.TrimSpace(strings.TrimPrefix(r.Path+" "+r.Version, m.Path))))
			}
		}
	}
	if b.ModuleVersion != "" {
		// Built from a module version (by ambientmc or go install): its CRDs are that version's.
		if dir, err := moduleSource(ctx, os.TempDir(), istioModule+"@"+b.ModuleVersion); err == nil {
			b.SourceDir = dir
		}
	}
	return b, nil
}
