// Package provider picks the cluster provider named by -provider.
package provider

import (
	"fmt"
	"io"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/provider/kube"
	"github.com/ambientmc/ambientmc/framework/provider/local"
)

// Options are what every provider needs from the environment.
type Options struct {
	RunDir string    // working files of this run
	Log    io.Writer // progress

	// Istio images (-istio.hub, -istio.tag, -istio.variant) for providers that install Istio.
	IstioHub, IstioTag, IstioVariant string
	// KubeReuseIstio is -kube.reuse-istio.
	KubeReuseIstio bool
}

// Names lists every provider name the framework knows.
var Names = []string{"local", "kind", "kube"}

// New returns the provider called name.
func New(name string, opts Options) (cluster.Provider, error) {
	switch name {
	case "local":
		return local.New(local.Options{RunDir: opts.RunDir, Log: opts.Log}), nil
	case "kube":
		p, err := kube.New(kube.Options{RunDir: opts.RunDir, Log: opts.Log, ReuseIstio: opts.KubeReuseIstio,
			Images: install.Images{Hub: opts.IstioHub, Tag: opts.IstioTag, Variant: opts.IstioVariant}})
		if err != nil {
			return nil, err // not a nil *kube.Provider in a non-nil interface
		}
		return p, nil
	case "kind":
		return nil, fmt.Errorf("-provider=%s: this provider is not implemented yet; use -provider=local (embedded clusters, runs anywhere Go runs)", name)
	default:
		return nil, fmt.Errorf("-provider=%s: unknown provider; choose one of local, kind, kube", name)
	}
}
