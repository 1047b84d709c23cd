package bins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

const (
	istioModule       = "istio.io/istio"
	pilotDiscoveryPkg = "istio.io/istio/pilot/cmd/pilot-discovery"
	// istioStampScheme is part of the cache key: change it when istioLdflags stamps differently.
	istioStampScheme = "istio-stamp-1"
	// IstiodWrappers holds one wrapper module per supported istio.io/istio version, relative to
	// the source root: its go.mod requires that version and carries the reviewed replaces.
	IstiodWrappers = "scripts/istiod"
)

// IstiodSpec chooses the istiod under test. At most one field is set; both empty means the
// istio.io/istio version the main go.mod pins.
type IstiodSpec struct {
	Version string // an istio.io/istio module version to build pilot-discovery from
	Binary  string // a pilot-discovery to run as it is
}

// IstiodBuild is the pilot-discovery a run uses and what is known about where it came from.
type IstiodBuild struct {
	Path string
	// ModuleVersion is the istio.io/istio version it was built from; "" when unknown (a binary
	// built from a developer's checkout).
	ModuleVersion string
	// SourceDir is that version's module directory (its CRDs live under manifests/); "" when unknown.
	SourceDir string
	// VersionOutput is what `pilot-discovery version` printed.
	VersionOutput string
	SHA256        string
	// ReplacedPins lists the dependency pins the wrapper module replaced, "module pin => replacement".
	ReplacedPins []string
	GoVersion    string
	// BuildInfo is the binary's debug/buildinfo, as `go version -m` prints it.
	BuildInfo string
}

// PinnedIstio is the istio.io/istio version the main go.mod requires: the default istiod.
func (c *Cache) PinnedIstio() (string, error) {
	return c.requiredVersion(recipe{moduleDir: "."}, istioModule)
}

// istioVersion is the istio.io/istio version s builds: its Version, else the pinned one.
func (c *Cache) istioVersion(s IstiodSpec) (string, error) {
	if s.Version != "" {
		return s.Version, nil
	}
	return c.PinnedIstio()
}

// checkedInIstiod is the recipe of a version with a wrapper under scripts/istiod.
func (c *Cache) checkedInIstiod(version string) (recipe, error) {
	r := recipe{moduleDir: filepath.Join(IstiodWrappers, version), pkg: pilotDiscoveryPkg, coldBuild: 5 * time.Minute, versionOf: istioModule}
	got, err := c.requiredVersion(r, istioModule)
	if err != nil {
		return recipe{}, fmt.Errorf("no wrapper module for istio.io/istio %s (%s/%s/go.mod): add one, as for the other versions there: %w",
			version, IstiodWrappers, version, err)
	}
	if got != version {
		return recipe{}, fmt.Errorf("%s/%s/go.mod requires istio.io/istio %s, not %s: fix the wrapper", IstiodWrappers, version, got, version)
	}
	return r, nil
}

func (c *Cache) hasCheckedIn(version string) bool {
	_, err := os.Stat(filepath.Join(c.SrcRoot, IstiodWrappers, version, "go.mod"))
	return err == nil
}

// generatedDir is where a wrapper for a version without a checked-in one is generated.
func (c *Cache) generatedDir(version string) string {
	return filepath.Join(c.Dir, "istiod-wrappers", version)
}

// istiodRecipe returns the recipe for version: the checked-in wrapper, else one generated in the
// cache (generating it if needed, under the cache lock).
func (c *Cache) istiodRecipe(ctx context.Context, version string) (recipe, error) {
	if c.hasCheckedIn(version) {
		return c.checkedInIstiod(version)
	}
	dir := c.generatedDir(version)
	r := recipe{moduleDir: dir, pkg: pilotDiscoveryPkg, coldBuild: 5 * time.Minute, versionOf: istioModule}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		return r, nil
	}
	unlock, err := c.lock()
	if err != nil {
		return recipe{}, err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		return r, nil
	}
	return r, c.generateWrapper(ctx, version, dir)
}

// IstiodMissing reports whether s needs a build first (for CheckTestTimeout).
func (c *Cache) IstiodMissing(s IstiodSpec) bool {
	if s.Binary != "" {
		return false
	}
	r, err := c.knownIstiodRecipe(s)
	if err != nil {
		return true
	}
	p, err := c.pathOf(PilotDiscovery, r)
	if err != nil {
		return true
	}
	_, err = os.Stat(p)
	return err != nil
}

// knownIstiodRecipe is the recipe of s without generating anything.
func (c *Cache) knownIstiodRecipe(s IstiodSpec) (recipe, error) {
	v, err := c.istioVersion(s)
	if err != nil {
		return recipe{}, err
	}
	if c.hasCheckedIn(v) {
		return c.checkedInIstiod(v)
	}
	dir := c.generatedDir(v)
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err != nil {
		return recipe{}, err
	}
	return recipe{moduleDir: dir, pkg: pilotDiscoveryPkg, coldBuild: 5 * time.Minute, versionOf: istioModule}, nil
}

// Istiod returns the pilot-discovery s names, building it into the cache first when s names a
// version (or nothing: the pinned one). Every version is built the same way, through its wrapper.
func (c *Cache) Istiod(ctx context.Context, s IstiodSpec) (*IstiodBuild, error) {
	if s.Version != "" && s.Binary != "" {
		return nil, errors.New("istiod: a version and a binary were both given; choose one")
	}
	if s.Binary != "" {
		return InspectIstiod(ctx, s.Binary)
	}
	v, err := c.istioVersion(s)
	if err != nil {
		return nil, err
	}
	r, err := c.istiodRecipe(ctx, v)
	if err != nil {
		return nil, err
	}
	path, err := c.ensureRecipe(ctx, PilotDiscovery, r)
	if err != nil {
		return nil, err
	}
	b, err := InspectIstiod(ctx, path)
	if err != nil {
		return nil, err
	}
	b.ModuleVersion = v
	if b.SourceDir, err = moduleSource(ctx, c.modDir(r), istioModule); err != nil {
		return nil, err
	}
	if b.ReplacedPins, err = replacedPins(filepath.Join(c.modDir(r), "go.mod"), filepath.Join(b.SourceDir, "go.mod")); err != nil {
		return nil, err
	}
	return b, nil
}
