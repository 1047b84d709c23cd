package env

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKindFlagsNameTheFlagAndTheFix(t *testing.T) {
	defaults := func() KindFlags { return *registerKind(flag.NewFlagSet("test", flag.ContinueOnError)) }
	ok := defaults()
	require.NoError(t, ok.validate(), "the defaults are valid")
	for _, tc := range []struct {
		name   string
		change func(*KindFlags)
		want   []string
	}{
		{"parallel", func(f *KindFlags) { f.Parallel = 0 }, []string{"-kind.parallel=0", "at least 1"}},
		{"image tag", func(f *KindFlags) { f.Image = "kindest/node:latest" }, []string{"-kind.image=kindest/node:latest", "vMAJOR.MINOR.PATCH"}},
		{"archive", func(f *KindFlags) { f.Load = filepath.Join(t.TempDir(), "nope.tar") }, []string{"-kind.load=", "nope.tar", "docker image save --platform"}},
		{"wait", func(f *KindFlags) { f.Wait = 0 }, []string{"-kind.wait=0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := defaults()
			tc.change(&f)
			err := f.validate()
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	f := defaults()
	f.Load = " a.tar, ,b.tar "
	assert.Equal(t, []string{"a.tar", "b.tar"}, f.archives())
}
