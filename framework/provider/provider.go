// Package provider is the registry of cluster providers. Each provider registers itself from its
// own package (framework/provider/<name>) with its name, flags and capabilities, and -provider
// picks one by name: a new provider is its folder plus one blank import (framework/env/providers.go).
package provider

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// Env is what every provider gets from the environment; everything else comes from its own flags.
type Env struct {
	// RunDir is the provider's working directory ("" when it is built only to check the input).
	RunDir string
	// Log receives progress lines.
	Log io.Writer
	// Istiods is how many istiods the run starts (0: one per primary) and PodsPerCluster the
	// scale's pods per cluster, for providers that size the host before starting anything.
	Istiods, PodsPerCluster int
	// IstiodClusters names the clusters an istiod runs in when that is not every primary
	// (-mesh.istiods=observed); nil otherwise. A provider may build the others lighter: they
	// need serve only what an istiod reads from a cluster it does not run in.
	IstiodClusters []string
	// Keep is -keep: the clusters stay after the run.
	Keep bool
	// Deadline is when the clusters must be gone for go test's -timeout (zero: no timeout).
	Deadline time.Time
	// Topology is the run's, for providers that estimate their setup (cluster.Facts); nil when the
	// provider is built only to check the input.
	Topology *topology.Topology
	// OnReady, where the provider's Facts say ReadyEarly, is called from Create's goroutines with
	// each cluster as soon as it is ready, while later ones start; it returns at once.
	OnReady func(*cluster.Cluster)
}

// Spec is a provider as it registers itself.
type Spec struct {
	// Name is the -provider value.
	Name string
	// Summary says where the clusters come from, in a few words for -provider's help.
	Summary string
	// Capabilities say which topologies the provider builds (Provider is set to Name).
	Capabilities topology.Capabilities
	// Flags registers the flags only this provider reads; a run with another -provider refuses
	// them. nil: none.
	Flags func(fs *flag.FlagSet)
	// Check validates the provider's flags before anything starts, naming the flag and the fix.
	// nil: nothing to check.
	Check func() error
	// Reads names flags registered elsewhere that this provider reads too (the Istio image flags
	// kind and kube share); a run of a provider that lists none of them refuses them.
	Reads []string
	// Wraps names the registered provider this one is built on, whose flags it reads too: a run
	// of this one does not refuse them ("": none).
	Wraps string
	// New builds the provider from e and its flags; it starts nothing.
	New func(e Env) (cluster.Provider, error)
	// ForTests marks a provider only the framework's own tests use: -provider accepts it, but its
	// help and errors do not offer it to users.
	ForTests bool
}

// registered is a Spec and the names of the flags it registered.
type registered struct {
	Spec
	flags []string
}

// specs holds every registered provider; Register runs from init functions, one at a time.
var specs = map[string]*registered{}

// Register adds s to the registry and its flags to the default flag set, so that
// `go test ./suites/multicluster -kind.wait=5m` works as written. Call it from an init function;
// a second provider of the same name, or a flag another package registered, panics.
func Register(s Spec) {
	if s.Name == "" || s.New == nil {
		panic("provider.Register: a provider needs a Name and New")
	}
	if _, dup := specs[s.Name]; dup {
		panic("provider.Register: a second provider named " + s.Name)
	}
	s.Capabilities.Provider = s.Name
	r := &registered{Spec: s}
	if s.Flags != nil {
		// The provider's own flag set says which flags are its; the default flag set shares
		// their values.
		own := flag.NewFlagSet(s.Name, flag.PanicOnError)
		s.Flags(own)
		own.VisitAll(func(f *flag.Flag) {
			flag.CommandLine.Var(f.Value, f.Name, f.Usage)
			r.flags = append(r.flags, f.Name)
		})
	}
	specs[s.Name] = r
}

// Names are the registered providers, sorted.
func Names() []string {
	var out []string
	for name := range specs {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// offered are the providers users are offered, sorted: every registered one but those ForTests.
func offered() []string {
	var out []string
	for _, name := range Names() {
		if !specs[name].ForTests {
			out = append(out, name)
		}
	}
	return out
}

// Usage is -provider's help: every provider users are offered and where its clusters come from.
func Usage() string {
	var each []string
	for _, name := range offered() {
		each = append(each, fmt.Sprintf("%s (%s)", name, specs[name].Summary))
	}
	return "where clusters come from: " + strings.Join(each, ", ")
}

// Lookup returns the registered provider called name (a provider that wraps another starts from
// its Spec).
func Lookup(name string) (Spec, error) {
	r, err := lookup(name)
	if err != nil {
		return Spec{}, err
	}
	return r.Spec, nil
}

func lookup(name string) (*registered, error) {
	r, ok := specs[name]
	if !ok {
		return nil, fmt.Errorf("-provider=%s: unknown provider; choose one of %s", name, strings.Join(offered(), ", "))
	}
	return r, nil
}

// Check refuses, before anything starts, an unknown provider, a flag of another provider (given a
// value other than its default) and what the provider's own Check refuses.
func Check(name string) error {
	r, err := lookup(name)
	if err != nil {
		return err
	}
	for _, other := range Names() {
		if other == name || other == r.Wraps {
			continue
		}
		for _, fname := range append(append([]string{}, specs[other].flags...), specs[other].Reads...) {
			if r.reads(fname) || (r.Wraps != "" && specs[r.Wraps].reads(fname)) {
				continue
			}
			if f := flag.CommandLine.Lookup(fname); f != nil && f.Value.String() != f.DefValue {
				return fmt.Errorf("-%s=%s: only -provider=%s reads it and this run uses -provider=%s, so drop the flag", fname, f.Value, strings.Join(readers(fname), " or "), name)
			}
		}
	}
	if r.Check != nil {
		return r.Check()
	}
	return nil
}

// reads says the provider registers flag fname or reads it.
func (s *registered) reads(fname string) bool {
	return slices.Contains(s.flags, fname) || slices.Contains(s.Reads, fname)
}

// readers are the providers that read flag fname, in name order.
func readers(fname string) []string {
	var out []string
	for _, n := range Names() {
		if specs[n].reads(fname) {
			out = append(out, n)
		}
	}
	return out
}

// New checks the input of the provider called name (Check) and builds it; it starts nothing.
func New(name string, e Env) (cluster.Provider, error) {
	if err := Check(name); err != nil {
		return nil, err
	}
	p, err := specs[name].New(e)
	if err != nil {
		return nil, err
	}
	if p.Name() != name {
		return nil, fmt.Errorf("-provider=%s: the provider it builds calls itself %q; its Name must be the one it registered", name, p.Name())
	}
	return p, nil
}

// CheckTopology reports every part of t the provider called name cannot build; where another
// registered provider can, the fix names it.
func CheckTopology(name string, t *topology.Topology) error {
	r, err := lookup(name)
	if err != nil {
		return err
	}
	var others []topology.Capabilities
	for _, other := range offered() {
		if other != name {
			others = append(others, specs[other].Capabilities)
		}
	}
	return t.Check(r.Capabilities, others...)
}
