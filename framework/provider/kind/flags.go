package kind

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/incluster"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/provider"
	"github.com/ambientmc/ambientmc/framework/report"
)

// flagValues are the kind provider's own flags (-kind.*).
type flagValues struct {
	parallel int
	image    string
	load     string // comma-separated image archives
	registry bool
	wait     time.Duration
}

// Name is the provider's -provider value.
const Name = "kind"

var flags flagValues

// The Istio image flags are incluster's: kind installs Istio through it.
func init() {
	provider.Register(provider.Spec{Name: Name, Summary: "kind clusters on Docker", Capabilities: capabilities,
		Flags: flags.register, Reads: incluster.ImageFlagNames, New: newFromFlags,
		Check: func() error { return flags.validate(incluster.ImageFlags()) }})
}

func (f *flagValues) register(fs *flag.FlagSet) {
	fs.IntVar(&f.parallel, "kind.parallel", DefaultParallel, "kind: clusters created at once (parallel kubeadm inits are CPU- and disk-bound and share the host's inotify budget)")
	fs.StringVar(&f.image, "kind.image", "", "kind: node image (empty: the one make images built); its tag's Kubernetes version picks the kubeadm patch API (v1beta3 below 1.36, v1beta4 from 1.36)")
	fs.StringVar(&f.load, "kind.load", "", "kind: comma-separated image archives (docker image save --platform ..., single-platform) loaded into every node")
	fs.BoolVar(&f.registry, "kind.registry", false, "kind: start a registry on the run's network and push the images only Docker's image store holds into it; every node pulls them through its containerd mirror (as Istio's CI runs kind-registry) instead of each importing them")
	fs.DurationVar(&f.wait, "kind.wait", 3*time.Minute, "kind: how long each cluster's control plane may take to become Ready; a node not Ready by then fails the create with its conditions and kubelet log")
}

// archives returns the -kind.load paths.
func (f *flagValues) archives() []string {
	var out []string
	for _, a := range strings.Split(f.load, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// validate reports -kind.* values and Istio images that cannot work, naming the flag and the fix.
func (f *flagValues) validate(im install.Images) error {
	if err := install.CheckImageFlags(Name, im); err != nil {
		return err
	}
	if f.parallel < 1 {
		return fmt.Errorf("-kind.parallel=%d: need at least 1 (default %d)", f.parallel, DefaultParallel)
	}
	if f.wait <= 0 {
		return fmt.Errorf("-kind.wait=%s: must be positive", f.wait)
	}
	if f.image != "" {
		if _, err := kindconfig.KubeadmAPIVersion(f.image); err != nil {
			return err
		}
	}
	for _, a := range f.archives() {
		if st, err := os.Stat(a); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("-kind.load=%s: no such image archive file; write one with `docker image save --platform linux/amd64 -o %s IMAGE`", a, a)
		}
	}
	return nil
}

// newFromFlags builds the provider from the flags. istiod, the gateways and the probes come from
// framework/incluster, over the kind clusters.
func newFromFlags(e provider.Env) (cluster.Provider, error) {
	built, err := images.Default()
	if err != nil {
		return nil, fmt.Errorf("-provider=kind: the images make images builds: %w", err)
	}
	im := install.OrBuilt(incluster.ImageFlags(), built)
	inCluster, err := incluster.New(incluster.Options{Name: Name, RunDir: filepath.Join(e.RunDir, "kube"), Log: e.Log, Images: im, SharedHost: true, OnThisHost: true})
	if err != nil {
		return nil, fmt.Errorf("-provider=kind: %w", err)
	}
	dataPlane := ""
	if im.RunsDataPlane() == report.DataPlaneEmulated { // the built images, with their data plane
		dataPlane = built.DataPlane
	}
	return New(Options{RunDir: e.RunDir, Log: e.Log, Image: flags.image, Parallel: flags.parallel, Load: flags.archives(), DataPlane: dataPlane, Registry: flags.registry,
		Wait: flags.wait, Keep: e.Keep, Deadline: e.Deadline, Istio: im, Built: built, InCluster: inCluster.Offered()}).Offered(), nil
}
