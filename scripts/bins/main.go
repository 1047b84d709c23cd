// Command bins pre-builds the binaries the local provider runs (kube-apiserver,
// kube-controller-manager, etcd, pilot-discovery) into the ambientmc cache, so that suites start
// without a cold build.
//
//	go run ./scripts/bins                          # the pinned versions
//	go run ./scripts/bins -istiod.version=VERSION  # also pilot-discovery of another istio.io/istio
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/ambientmc/ambientmc/framework/bins"
)

func main() {
	version := flag.String("istiod.version", "", "also build pilot-discovery of this istio.io/istio module version")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := build(ctx, *version); err != nil {
		fmt.Fprintln(os.Stderr, "bins:", err)
		os.Exit(1)
	}
}

func build(ctx context.Context, version string) error {
	cache, err := bins.Default()
	if err != nil {
		return err
	}
	if version != "" {
		if err := cache.CheckIstiod(ctx, bins.IstiodSpec{Version: version}); err != nil {
			return fmt.Errorf("-istiod.version=%s: %w", version, err)
		}
	}
	paths, err := cache.Ensure(ctx, bins.All...)
	if err != nil {
		return err
	}
	for _, b := range bins.All {
		fmt.Printf("%-16s %s\n", b, paths[b])
	}
	if version == "" {
		return nil
	}
	ist, err := cache.Istiod(ctx, bins.IstiodSpec{Version: version})
	if err != nil {
		return err
	}
	fmt.Printf("%-16s %s\n%-16s %s\n", "istiod "+version, ist.Path, "", ist.VersionOutput)
	return nil
}
