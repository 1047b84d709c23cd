package kind

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/mesh/install"
)

func TestKindFlagsNameTheFlagAndTheFix(t *testing.T) {
	defaults := func() *flagValues {
		f := &flagValues{}
		f.register(flag.NewFlagSet("test", flag.ContinueOnError))
		return f
	}
	images := install.Images{Hub: "registry.istio.io/testing", Tag: "1.31-dev"}
	require.NoError(t, defaults().validate(images), "the defaults are valid")
	assert.ErrorContains(t, defaults().validate(install.Images{Hub: images.Hub}), "-provider=kind installs Istio from images: pass -istio.tag")
	assert.ErrorContains(t, defaults().validate(install.Images{Build: "v1.2.3"}), "-istio.build=v1.2.3 names the build of -istio.hub's images: pass -istio.hub and -istio.tag too")
	for _, tc := range []struct {
		name   string
		change func(*flagValues)
		want   []string
	}{
		{"parallel", func(f *flagValues) { f.parallel = 0 }, []string{"-kind.parallel=0", "at least 1"}},
		{"image tag", func(f *flagValues) { f.image = "kindest/node:latest" }, []string{"-kind.image=kindest/node:latest", "vMAJOR.MINOR.PATCH"}},
		{"archive", func(f *flagValues) { f.load = filepath.Join(t.TempDir(), "nope.tar") }, []string{"-kind.load=", "nope.tar", "docker image save --platform"}},
		{"wait", func(f *flagValues) { f.wait = 0 }, []string{"-kind.wait=0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := defaults()
			tc.change(f)
			err := f.validate(images)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	f := defaults()
	f.load = " a.tar, ,b.tar "
	assert.Equal(t, []string{"a.tar", "b.tar"}, f.archives())
}
