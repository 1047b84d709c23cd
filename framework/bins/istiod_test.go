package bins

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	pinned131 = "v0.0.0-20260827124520-eed52ebb66ad" // release-1.31, what go.mod pins
	rel130    = "v0.0.0-20260826214018-9739e10eb9d7" // release-1.30, needs five replaces
)

func thisCheckout(t *testing.T) *Cache {
	t.Helper()
	root, err := SourceRoot()
	require.NoError(t, err)
	return &Cache{Dir: t.TempDir(), SrcRoot: root, Log: io.Discard}
}

// The default istiod is built through the checked-in wrapper of the version go.mod pins.
func TestDefaultIstiodIsThePinnedWrapper(t *testing.T) {
	c := thisCheckout(t)
	v, err := c.PinnedIstio()
	require.NoError(t, err)
	assert.Equal(t, pinned131, v, "update the wrapper under scripts/istiod along with go.mod")
	r, err := c.checkedInIstiod(v)
	require.NoError(t, err)
	fromWrapper, err := c.pathOf(PilotDiscovery, r)
	require.NoError(t, err)
	def, err := c.Path(PilotDiscovery)
	require.NoError(t, err)
	assert.Equal(t, fromWrapper, def, "make bins and -istiod.version=<pinned> share one cache entry")
	assert.False(t, c.IstiodMissing(IstiodSpec{Binary: "/x"}), "a given binary is never built")
}

// Cache entries are keyed by version (through the wrapper's go.mod) and by the wrapper's go.sum.
func TestIstiodCacheKeyByVersionAndGoSum(t *testing.T) {
	c := thisCheckout(t)
	a, err := c.checkedInIstiod(pinned131)
	require.NoError(t, err)
	b, err := c.checkedInIstiod(rel130)
	require.NoError(t, err)
	pa, err := c.pathOf(PilotDiscovery, a)
	require.NoError(t, err)
	pb, err := c.pathOf(PilotDiscovery, b)
	require.NoError(t, err)
	assert.NotEqual(t, pa, pb)
	assert.Regexp(t, `/pilot-discovery-[0-9a-f]{12}/pilot-discovery$`, pb)

	// A copy of the wrapper with one go.sum line changed is another entry.
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(c.modDir(b), f))
		require.NoError(t, err)
		if f == "go.sum" {
			data = append(data, "example.org/x v1.0.0 h1:abc=\n"...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
	}
	pc, err := c.pathOf(PilotDiscovery, recipe{moduleDir: dir, pkg: pilotDiscoveryPkg, versionOf: istioModule})
	require.NoError(t, err)
	assert.NotEqual(t, pb, pc)
}

func TestIstioVersionIsStamped(t *testing.T) {
	flags := istioLdflags(rel130, "1.30")
	for _, want := range []string{
		"-X istio.io/istio/pkg/version.buildVersion=1.30-dev ",
		"-X istio.io/istio/pkg/version.buildGitRevision=9739e10eb9d7 ",
		"-X istio.io/istio/pkg/version.buildStatus=Clean ",
		"-X istio.io/istio/pkg/version.buildTag=" + rel130 + " ",
	} {
		assert.Contains(t, flags, want)
	}
	// The VERSION file comes from the version's own module source.
	c := thisCheckout(t)
	r, err := c.checkedInIstiod(pinned131)
	require.NoError(t, err)
	got, err := c.ldflags(context.Background(), r)
	require.NoError(t, err)
	assert.Contains(t, got, "buildVersion=1.31-dev ")
	assert.Contains(t, got, "buildGitRevision=eed52ebb66ad ")
}

// The five replaces of the 1.30 wrapper are reported against the pins they replace.
func TestReplacedPins(t *testing.T) {
	c := thisCheckout(t)
	r, err := c.checkedInIstiod(rel130)
	require.NoError(t, err)
	src, err := moduleSource(context.Background(), c.modDir(r), istioModule)
	require.NoError(t, err)
	pins, err := replacedPins(filepath.Join(c.modDir(r), "go.mod"), filepath.Join(src, "go.mod"))
	require.NoError(t, err)
	assert.Len(t, pins, 5)
	assert.Contains(t, pins, "istio.io/api v1.30.4-0.20260824163423-69099aec2678 => v1.30.8")
	assert.Contains(t, pins, "github.com/envoyproxy/go-control-plane/envoy v1.37.1-0.20260409083702-98966259b99a => v1.37.1-0.20260713214202-ca8ce173c36f")

	r, err = c.checkedInIstiod(pinned131)
	require.NoError(t, err)
	pins, err = replacedPins(filepath.Join(c.modDir(r), "go.mod"), filepath.Join(src, "go.mod"))
	require.NoError(t, err)
	assert.Empty(t, pins, "the pinned version builds with its own pins")
}

// A version with no checked-in wrapper gets one generated in the cache, with that version's pins.
func TestWrapperGeneratedForVersionWithoutOne(t *testing.T) {
	c := thisCheckout(t)
	c.SrcRoot = t.TempDir() // a checkout without scripts/istiod
	r, err := c.istiodRecipe(context.Background(), pinned131)
	require.NoError(t, err)
	assert.Equal(t, c.generatedDir(pinned131), r.moduleDir)
	got, err := c.requiredVersion(r, istioModule)
	require.NoError(t, err)
	assert.Equal(t, pinned131, got)
	grpc, err := c.requiredVersion(r, "google.golang.org/grpc")
	require.NoError(t, err)
	assert.Equal(t, "v1.82.0", grpc, "Istio's own grpc pin, not the main module's raised one")
	sum, err := os.ReadFile(filepath.Join(r.moduleDir, "go.sum"))
	require.NoError(t, err)
	assert.Contains(t, string(sum), "istio.io/istio "+pinned131)
	tools, err := os.ReadFile(filepath.Join(r.moduleDir, "tools.go"))
	require.NoError(t, err)
	assert.Contains(t, string(tools), pilotDiscoveryPkg)
}

// A version whose dependencies the proxy does not serve fails naming them, without building.
func TestUnbuildableVersionNamesTheMissingModules(t *testing.T) {
	c := thisCheckout(t)
	c.SrcRoot = t.TempDir() // hide the reviewed 1.30 wrapper
	_, err := c.Istiod(context.Background(), IstiodSpec{Version: rel130})
	require.Error(t, err)
	for _, want := range []string{"istio.io/api@v1.30.4-0.20260824163423-69099aec2678", "istio.io/client-go@",
		"add a reviewed wrapper module scripts/istiod/" + rel130} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NoDirExists(t, c.generatedDir(rel130), "nothing half-generated is left to be reused")
	assertNothingBuilt(t, c)
}

// A version the proxy does not serve is refused by the fast check and by Istiod, without building.
func TestUnknownVersionIsOneClearError(t *testing.T) {
	const unknown = "v0.0.0-20990101000000-000000000000"
	err := CheckIstioVersion(context.Background(), unknown)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "istio.io/istio "+unknown+" is not served by the module proxy")
	require.NoError(t, CheckIstioVersion(context.Background(), rel130), "the proxy serves the 1.30 version itself")

	c := thisCheckout(t)
	_, err = c.Istiod(context.Background(), IstiodSpec{Version: unknown})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not served by the module proxy")
	assert.NotContains(t, err.Error(), "add a reviewed wrapper", "the version itself is missing, not a dependency")
	assertNothingBuilt(t, c)

	assert.ErrorContains(t, CheckIstioVersion(context.Background(), "release-1.30"), "not a module version")
}

func assertNothingBuilt(t *testing.T, c *Cache) {
	t.Helper()
	built, _ := filepath.Glob(filepath.Join(c.Dir, "pilot-discovery-*"))
	assert.Empty(t, built)
}

// The real builds, when `go run ./scripts/bins -istiod.version=...` has cached them (minutes each).
func TestBuiltIstiodsRunAndDescribeThemselves(t *testing.T) {
	c, err := Default()
	require.NoError(t, err)
	c.Log = io.Discard
	for _, tc := range []struct{ version, short, rev string }{{pinned131, "1.31-dev", "eed52ebb66ad"}, {rel130, "1.30-dev", "9739e10eb9d7"}} {
		t.Run(tc.short, func(t *testing.T) {
			spec := IstiodSpec{Version: tc.version}
			if c.IstiodMissing(spec) {
				t.Skipf("pilot-discovery %s not cached: go run ./scripts/bins -istiod.version=%s", tc.version, tc.version)
			}
			b, err := c.Istiod(context.Background(), spec)
			require.NoError(t, err)
			assert.Contains(t, b.VersionOutput, `Version:"`+tc.short+`"`)
			assert.Contains(t, b.VersionOutput, `GitRevision:"`+tc.rev+`"`)
			assert.NotContains(t, b.VersionOutput, "unknown")
			assert.Equal(t, tc.version, b.ModuleVersion)
			assert.FileExists(t, filepath.Join(b.SourceDir, "manifests", "charts", "base", "files", "crd-all.gen.yaml"))
			assert.Len(t, b.SHA256, 64)
			assert.NotEmpty(t, b.GoVersion)
			assert.Contains(t, b.BuildInfo, "istio.io/istio\t"+tc.version)
			if tc.version == rel130 {
				assert.Len(t, b.ReplacedPins, 5)
				assert.Contains(t, b.BuildInfo, "=>\tistio.io/api\tv1.30.8", "the replace is what was linked")
			}

			// -istiod.binary with a copy: same content, the version read back from its buildinfo.
			cp := filepath.Join(t.TempDir(), "my-pilot-discovery")
			data, err := os.ReadFile(b.Path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(cp, data, 0o755))
			require.NoError(t, c.CheckIstiod(context.Background(), IstiodSpec{Binary: cp}))
			got, err := c.Istiod(context.Background(), IstiodSpec{Binary: cp})
			require.NoError(t, err)
			assert.Equal(t, b.SHA256, got.SHA256)
			assert.Equal(t, tc.version, got.ModuleVersion)
			assert.Equal(t, b.SourceDir, got.SourceDir)
			assert.Len(t, got.ReplacedPins, len(b.ReplacedPins), "a binary's replaces are read from its buildinfo")
			assert.True(t, strings.HasSuffix(got.Path, "my-pilot-discovery"))
		})
	}
}
