package env

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/flagtest"
)

func TestIstiodFlagsAreRegistered(t *testing.T) {
	for _, name := range []string{"istiod.version", "istiod.binary"} {
		assert.NotNil(t, flag.CommandLine.Lookup(name), "-%s on the suite's flag set", name)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var f IstiodFlags
	registerIstiod(fs, &f)
	require.NoError(t, fs.Parse([]string{"-istiod.version=v1.2.3"}))
	assert.Equal(t, "v1.2.3", f.Spec().Version)
}

// Bad -istiod.* values fail setup with one error naming the flag, before anything starts
// (setupWith also checks that no run directory was left behind).
func TestSetupRejectsBadIstiodBeforeStartingAnything(t *testing.T) {
	dir := t.TempDir()
	text := writeFile(t, dir, "notes.txt", "hello", 0o644)
	// Prints Istio's version line for any arguments, but has no discovery command.
	fake := writeFile(t, dir, "istioctl", "#!/bin/sh\necho 'client version: version.BuildInfo{Version:\"1.31\"}'\n", 0o755)

	for _, tc := range []struct {
		name string
		f    IstiodFlags
		want []string
	}{
		{"both", IstiodFlags{Version: "v0.0.0-20260826214018-9739e10eb9d7", Binary: fake}, []string{"-istiod.version=", "-istiod.binary=", "give one of them"}},
		{"version the proxy does not serve", IstiodFlags{Version: "v0.0.0-20990101000000-000000000000"},
			[]string{"-istiod.version=v0.0.0-20990101000000-000000000000", "not served by the module proxy"}},
		{"a query, not a version", IstiodFlags{Version: "master"}, []string{"-istiod.version=master", "not a module version"}},
		{"missing binary", IstiodFlags{Binary: filepath.Join(dir, "nope")}, []string{"-istiod.binary=", "no such file"}},
		{"not executable", IstiodFlags{Binary: text}, []string{"-istiod.binary=" + text, "not an executable"}},
		{"not istio at all", IstiodFlags{Binary: "/bin/true"}, []string{"-istiod.binary=/bin/true", "does not run as pilot-discovery"}},
		{"istio, but not pilot-discovery", IstiodFlags{Binary: fake}, []string{"-istiod.binary=" + fake, "no `discovery` command"}},
		{"a provider that runs istiod images", IstiodFlags{Version: "v0.0.0-20260826214018-9739e10eb9d7"},
			[]string{"-istiod.version/-istiod.binary with -provider=kind", "kind runs istiod images; drop them"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := "local"
			if tc.name == "a provider that runs istiod images" {
				provider = "kind"
			}
			if provider == "kind" { // kind's own requirements met: only the istiod flags are wrong
				flagtest.Set(t, "istio.hub", "h")
				flagtest.Set(t, "istio.tag", "t")
			}
			err := setupWith(t, flagsWith(func(f *Flags) { f.Clusters, f.Provider, f.Istiod = 1, provider, tc.f }))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
