package provider

import (
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/flagtest"
	"github.com/ambientmc/ambientmc/topology"
)

// named is a provider that only answers Name; building one starts nothing.
type named struct {
	cluster.Provider
	name string
}

func (p named) Name() string { return p.name }

var alphaN int

// Registered from init, as providers register themselves.
func init() {
	Register(Spec{
		Name: "alpha", Summary: "two clusters at most",
		Capabilities: topology.Capabilities{MaxClusters: 2},
		Flags:        func(fs *flag.FlagSet) { fs.IntVar(&alphaN, "alpha.n", 1, "alpha: a count") },
		Check: func() error {
			if alphaN < 1 {
				return fmt.Errorf("-alpha.n=%d: need at least 1", alphaN)
			}
			return nil
		},
		New: func(Env) (cluster.Provider, error) { return named{name: "alpha"}, nil },
	})
	Register(Spec{Name: "beta", Summary: "any number", New: func(Env) (cluster.Provider, error) { return named{name: "beta"}, nil }})
	Register(Spec{Name: "misnamed", Summary: "calls itself otherwise", Capabilities: topology.Capabilities{MaxClusters: 1},
		New: func(Env) (cluster.Provider, error) { return named{name: "other"}, nil }})
	Register(Spec{Name: "wrapper", Summary: "alpha under another name", Capabilities: topology.Capabilities{MaxClusters: 2}, Wraps: "alpha", ForTests: true,
		New: func(e Env) (cluster.Provider, error) {
			if _, err := New("alpha", e); err != nil {
				return nil, err
			}
			return named{name: "wrapper"}, nil
		}})
}

func TestRegisteredProvidersAreNamedAndDescribed(t *testing.T) {
	assert.Equal(t, []string{"alpha", "beta", "misnamed", "wrapper"}, Names())
	assert.Equal(t, "where clusters come from: alpha (two clusters at most), beta (any number), misnamed (calls itself otherwise)", Usage(),
		"a provider for tests is not offered")
	assert.Panics(t, func() { Register(Spec{Name: "beta", New: func(Env) (cluster.Provider, error) { return nil, nil }}) }, "a second beta")
}

func TestAProvidersFlagsAreOnTheDefaultFlagSet(t *testing.T) {
	require.NoError(t, flag.CommandLine.Set("alpha.n", "3"))
	t.Cleanup(func() { alphaN = 1 })
	assert.Equal(t, 3, alphaN, "the provider's variable holds what the command line gave")
}

func TestCheckRefusesBeforeAnythingStarts(t *testing.T) {
	assert.EqualError(t, Check("gamma"), "-provider=gamma: unknown provider; choose one of alpha, beta, misnamed")
	require.NoError(t, Check("wrapper"), "a provider for tests is accepted, though not offered")
	require.NoError(t, Check("alpha"))
	require.NoError(t, Check("beta"), "alpha's flag at its default is no reason to refuse")

	flagtest.Set(t, "alpha.n", "0")
	assert.EqualError(t, Check("alpha"), "-alpha.n=0: need at least 1", "the provider's own check")
	_, err := New("alpha", Env{})
	assert.EqualError(t, err, "-alpha.n=0: need at least 1", "New checks first")

	_, err = New("wrapper", Env{})
	assert.EqualError(t, err, "-alpha.n=0: need at least 1", "the wrapped provider checks its own flags when the wrapper builds it")

	flagtest.Set(t, "alpha.n", "5")
	assert.EqualError(t, Check("beta"), "-alpha.n=5: only -provider=alpha reads it and this run uses -provider=beta, so drop the flag")
	assert.NoError(t, Check("wrapper"), "a provider reads the flags of the one it wraps")
}

func TestLookupReturnsTheRegisteredSpec(t *testing.T) {
	s, err := Lookup("alpha")
	require.NoError(t, err)
	assert.Equal(t, topology.Capabilities{Provider: "alpha", MaxClusters: 2}, s.Capabilities, "Provider is the registered name")
	_, err = Lookup("gamma")
	assert.ErrorContains(t, err, "-provider=gamma: unknown provider")
}

func TestNewBuildsTheNamedProvider(t *testing.T) {
	p, err := New("beta", Env{})
	require.NoError(t, err)
	assert.Equal(t, "beta", p.Name())
	_, err = New("misnamed", Env{})
	assert.EqualError(t, err, `-provider=misnamed: the provider it builds calls itself "other"; its Name must be the one it registered`)
}

// The fix names the other providers that can build what this one cannot, never this one.
func TestCheckTopologyNamesTheProvidersThatCan(t *testing.T) {
	topo, err := topology.Generate(3)
	require.NoError(t, err)
	err = CheckTopology("alpha", topo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "use at most 2 clusters with -provider=alpha, or -provider=beta for more")
	assert.NoError(t, CheckTopology("beta", topo))
	assert.EqualError(t, CheckTopology("gamma", topo), "-provider=gamma: unknown provider; choose one of alpha, beta, misnamed")
}
