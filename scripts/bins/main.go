// Command bins prepares everything a first run needs, so it is as fast as any later one: it
// builds the binaries the local provider runs (kube-apiserver, kube-controller-manager, etcd,
// pilot-discovery) into the ambientmc cache, stores the CRD seed beside them (one API server,
// about 10 s), and compiles the suites' test binary into Go's build cache.
//
//	go run ./scripts/bins                          # the pinned versions
//	go run ./scripts/bins -istiod.version=VERSION  # also pilot-discovery of another istio.io/istio
//	go run ./scripts/bins -checks.controls         # also the istiod the checks' controls run (make ci)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/istiodcheck"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/provider/local"
)

func main() {
	version := flag.String("istiod.version", "", "also build pilot-discovery of this istio.io/istio module version")
	controls := flag.Bool("checks.controls", false, "also build the istiod the istiod checks' controls run (release-1.30, which has a fix the pinned istiod lacks)")
	flag.Parse()
	if *controls {
		if *version != "" && *version != istiodcheck.IstioRelease130 {
			fmt.Fprintln(os.Stderr, "bins: -checks.controls builds release-1.30's istiod; drop -istiod.version or run twice")
			os.Exit(2)
		}
		*version = istiodcheck.IstioRelease130
	}
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
	if err := seed(ctx, cache, ""); err != nil {
		return err
	}
	if err := compileSuites(ctx, cache.SrcRoot); err != nil {
		return err
	}
	if version == "" {
		return nil
	}
	ist, err := cache.Istiod(ctx, bins.IstiodSpec{Version: version})
	if err != nil {
		return err
	}
	fmt.Printf("%-16s %s\n%-16s %s\n", "istiod "+version, ist.Path, "", ist.VersionOutput)
	// That istiod's own CRDs are applied when it runs: seed them too.
	return seed(ctx, cache, ist.SourceDir)
}

// seed stores the CRD seed of the CRDs a run applies (the pinned istio's, or those of the
// istio.io/istio source in istioDir).
func seed(ctx context.Context, cache *bins.Cache, istioDir string) error {
	set, err := crds.LoadFrom(ctx, cache.SrcRoot, istioDir)
	if err != nil {
		return err
	}
	start := time.Now()
	wrote, err := local.PrepareCRDSeed(ctx, local.Options{Cache: cache, Log: os.Stderr}, set)
	if err != nil {
		return err
	}
	if wrote {
		fmt.Printf("%-16s written in %.1fs\n", "crd seed", time.Since(start).Seconds())
	} else {
		fmt.Printf("%-16s present\n", "crd seed")
	}
	return nil
}

// compileSuites compiles the suites' test binary, so `go test ./suites/multicluster` links at once.
func compileSuites(ctx context.Context, root string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", os.DevNull, "./suites/multicluster")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("compiling the suites: %w", err)
	}
	fmt.Printf("%-16s compiled in %.1fs\n", "suites", time.Since(start).Seconds())
	return nil
}
