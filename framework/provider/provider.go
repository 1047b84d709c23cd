// Package provider picks the cluster provider named by -provider.
package provider

import (
	"fmt"
	"io"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/provider/local"
	"github.com/ambientmc/ambientmc/topology"
)

// Options are what every provider needs from the environment.
type Options struct {
	RunDir string    // working files of this run
	Log    io.Writer // progress
}

// Names lists every provider name the framework knows.
var Names = []string{"local", "kind", "kube"}

// New returns the provider called name.
func New(name string, opts Options) (cluster.Provider, error) {
	switch name {
	case "local":
		return local.New(local.Options{RunDir: opts.RunDir, Log: opts.Log}), nil
	case "kind", "kube":
		return nil, fmt.Errorf("-provider=%s: this provider is not implemented yet; use -provider=local (embedded clusters, runs anywhere Go runs)", name)
	default:
		return nil, fmt.Errorf("-provider=%s: unknown provider; choose one of local, kind, kube", name)
	}
}

// Capabilities returns what the named provider can build, for checking a topology before
// anything starts.
func Capabilities(name string) (topology.Capabilities, error) {
	p, err := New(name, Options{})
	if err != nil {
		return topology.Capabilities{}, err
	}
	return p.Capabilities(), nil
}
