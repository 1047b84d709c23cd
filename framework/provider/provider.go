// Package provider picks the cluster provider named by -provider.
package provider

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/provider/kind"
	"github.com/ambientmc/ambientmc/framework/provider/kube"
	"github.com/ambientmc/ambientmc/framework/provider/local"
)

// Options are what every provider needs from the environment.
type Options struct {
	RunDir string    // working files of this run
	Log    io.Writer // progress

	// Istio images (-istio.hub, -istio.tag, -istio.variant) for providers that install Istio.
	IstioHub, IstioTag, IstioVariant string
	// IstioPlatform is -istio.platform (kube).
	IstioPlatform string
	// Istiods is how many istiods the run starts (0: one per primary) and PodsPerCluster the
	// scale's pods per cluster, for providers that size the host before starting anything.
	Istiods, PodsPerCluster int
	// KubeReuseIstio is -kube.reuse-istio.
	KubeReuseIstio bool
	// Kind carries the -kind.* flags and -keep; RunDir, Log and the Istio images are set here.
	Kind kind.Options
	// Local carries the -local.* flags; RunDir, Log, Istiods and PodsPerCluster are set here.
	Local local.Options
}

// Names lists every provider name the framework knows.
var Names = []string{"local", "kind", "kube"}

// New returns the provider called name.
func New(name string, opts Options) (cluster.Provider, error) {
	switch name {
	case "local":
		o := opts.Local
		o.RunDir, o.Log, o.Istiods, o.PodsPerCluster = opts.RunDir, opts.Log, opts.Istiods, opts.PodsPerCluster
		return local.New(o), nil
	case "kube":
		p, err := kube.New(kube.Options{RunDir: opts.RunDir, Log: opts.Log, ReuseIstio: opts.KubeReuseIstio, Platform: opts.IstioPlatform,
			Images: install.Images{Hub: opts.IstioHub, Tag: opts.IstioTag, Variant: opts.IstioVariant}})
		if err != nil {
			return nil, err // not a nil *kube.Provider in a non-nil interface
		}
		return p, nil
	case "kind":
		images := install.Images{Hub: opts.IstioHub, Tag: opts.IstioTag, Variant: opts.IstioVariant}
		if images.Hub == "" || images.Tag == "" {
			return nil, fmt.Errorf("-provider=kind runs real Istio images and has no default for them: pass -istio.hub (e.g. registry.istio.io/testing) and -istio.tag (e.g. 1.31-dev or a full commit SHA)")
		}
		// kind's clusters get istiod, gateways and probes from the kube provider's in-cluster code.
		inCluster, err := kube.New(kube.Options{RunDir: filepath.Join(opts.RunDir, "kube"), Log: opts.Log, Images: images})
		if err != nil {
			return nil, fmt.Errorf("-provider=kind: %w", err)
		}
		o := opts.Kind
		o.RunDir, o.Log, o.InCluster = opts.RunDir, opts.Log, inCluster
		o.Istio = images
		return kind.New(o), nil
	default:
		return nil, fmt.Errorf("-provider=%s: unknown provider; choose one of local, kind, kube", name)
	}
}
