// Command registry is distribution's registry (github.com/distribution/distribution/v3
// cmd/registry, the registry Istio's CI runs beside its kind clusters) with only the filesystem
// storage driver: the registry -kind.registry starts on a run's own network needs no cloud
// storage, and leaving those drivers out spares make images most of the build.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
