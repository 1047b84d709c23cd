package env

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/provider/kind"
)

// KindFlags are the kind provider's flags (-kind.*).
type KindFlags struct {
	Parallel int
	Image    string
	Load     string // comma-separated image archives
	Wait     time.Duration
}

// kindFlags holds the values of the registered -kind.* flags.
var kindFlags = registerKind(flag.CommandLine)

func registerKind(fs *flag.FlagSet) *KindFlags {
	f := &KindFlags{}
	fs.IntVar(&f.Parallel, "kind.parallel", kind.DefaultParallel, "kind: clusters created at once (parallel kubeadm inits are CPU- and disk-bound and share the host's inotify budget)")
	fs.StringVar(&f.Image, "kind.image", kind.DefaultImage, "kind: node image; its tag's Kubernetes version picks the kubeadm patch API (v1beta3 below 1.36, v1beta4 from 1.36)")
	fs.StringVar(&f.Load, "kind.load", "", "kind: comma-separated image archives (docker image save --platform ..., single-platform) loaded into every node")
	fs.DurationVar(&f.Wait, "kind.wait", 3*time.Minute, "kind: how long each cluster's control plane may take to become Ready; a node not Ready by then fails the create with its conditions and kubelet log")
	return f
}

// archives returns the -kind.load paths.
func (f *KindFlags) archives() []string {
	var out []string
	for _, a := range strings.Split(f.Load, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// validate reports -kind.* values that cannot work, naming the flag and the fix.
func (f *KindFlags) validate() error {
	if f.Parallel < 1 {
		return fmt.Errorf("-kind.parallel=%d: need at least 1 (default %d)", f.Parallel, kind.DefaultParallel)
	}
	if f.Wait <= 0 {
		return fmt.Errorf("-kind.wait=%s: must be positive", f.Wait)
	}
	if _, err := kind.KubeadmAPIVersion(f.Image); err != nil {
		return err
	}
	for _, a := range f.archives() {
		if st, err := os.Stat(a); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("-kind.load=%s: no such image archive file; write one with `docker image save --platform linux/amd64 -o %s IMAGE`", a, a)
		}
	}
	return nil
}

// testDeadline is when go test's -timeout fires, counted from now (the test binary's alarm starts
// later, so this errs early), less a minute (or a tenth) for deleting the clusters; zero without
// a timeout.
func testDeadline() time.Time {
	d := plan.TestTimeout()
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(max(d-time.Minute, d*9/10))
}

// kindOptions are the kind provider's options from the flags; provider.New adds the run
// directory, the log and the Istio images.
func (e *Env) kindOptions() kind.Options {
	return kind.Options{Image: kindFlags.Image, Parallel: kindFlags.Parallel, Load: kindFlags.archives(),
		Wait: kindFlags.Wait, Keep: e.Flags.Keep, Deadline: testDeadline()}
}
