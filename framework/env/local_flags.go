package env

import (
	"flag"
	"fmt"

	"github.com/ambientmc/ambientmc/framework/provider/local"
)

// LocalFlags are the local provider's flags (-local.*).
type LocalFlags struct {
	Controllers bool
	Wave        int
}

// localFlags holds the values of the registered -local.* flags.
var localFlags = registerLocal(flag.CommandLine)

func registerLocal(fs *flag.FlagSet) *LocalFlags {
	f := &LocalFlags{}
	fs.BoolVar(&f.Controllers, "local.controllers", true, "local: run kube-controller-manager in every cluster (EndpointSlices, namespaces, garbage collection, service accounts, node IPAM and lifecycle, workload controllers); false only to compare with clusters that have none")
	fs.IntVar(&f.Wave, "local.wave", 0, fmt.Sprintf("local: clusters that start at once, so the API servers initialising together and the shared etcd keep up (0: two per CPU, 2 to 4: %d here)", local.DefaultWave()))
	return f
}

// validate reports -local.* values that cannot work, naming the flag and the fix.
func (f *LocalFlags) validate() error {
	if f.Wave < 0 {
		return fmt.Errorf("-local.wave=%d: must be 0 (two per CPU, at most 4) or a positive number of clusters", f.Wave)
	}
	return nil
}

// localOptions are the local provider's options from the flags; provider.New adds the rest.
func localOptions() local.Options {
	return local.Options{NoControllers: !localFlags.Controllers, Wave: localFlags.Wave}
}
