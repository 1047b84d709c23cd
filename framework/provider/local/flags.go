package local

import (
	"flag"
	"fmt"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/provider"
)

// flagValues are the local provider's own flags (-local.*).
type flagValues struct {
	controllers bool
	wave        int
	snapshots   bool
}

// Name is the provider's -provider value.
const Name = "local"

var flags flagValues

func init() {
	provider.Register(provider.Spec{
		Name:         Name,
		Summary:      "embedded kube-apiserver and etcd",
		Capabilities: capabilities,
		Flags:        flags.register,
		Check:        flags.validate,
		New: func(e provider.Env) (cluster.Provider, error) {
			return New(Options{RunDir: e.RunDir, Log: e.Log, Istiods: e.Istiods, IstiodClusters: e.IstiodClusters, PodsPerCluster: e.PodsPerCluster,
				NoControllers: !flags.controllers, Wave: flags.wave, NoWorkloadSnapshots: !flags.snapshots,
				Topology: e.Topology, OnReady: e.OnReady}), nil
		},
	})
}

func (f *flagValues) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.controllers, "local.controllers", true, "local: run kube-controller-manager in every cluster (EndpointSlices, namespaces, garbage collection, service accounts, node IPAM and lifecycle, workload controllers); false only to compare with clusters that have none")
	fs.BoolVar(&f.snapshots, "local.snapshots", true, fmt.Sprintf("local: from %d pods per cluster or %d in the run, start each cluster holding the scale workloads an earlier run with the same inputs wrote (kept in the binary cache, one per cluster), and keep them after writing them; false writes them through the API on every run", snapshotMinPods, snapshotMinRunPods))
	fs.IntVar(&f.wave, "local.wave", 0, fmt.Sprintf("local: clusters that start at once, so the API servers initialising together and the shared etcd keep up (0: two per CPU, 2 to 4: %d here)", DefaultWave()))
}

// validate reports -local.* values that cannot work, naming the flag and the fix.
func (f *flagValues) validate() error {
	if f.wave < 0 {
		return fmt.Errorf("-local.wave=%d: must be 0 (two per CPU, at most 4) or a positive number of clusters", f.wave)
	}
	return nil
}
