// Command kindup stands up kind clusters the way a user with existing clusters has them, for the
// kube provider's pass on this machine (make ci-kube): it creates the clusters of a topology with
// the kind provider (node image and network of `make images` and the run, MetalLB, nothing of
// Istio), writes a topology file naming their kubeconfigs, and deletes everything when it gets
// SIGINT or SIGTERM.
//
//	go run ./scripts/kindup -clusters=2 -out DIR   # writes DIR/topology.yaml, then waits
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/provider/kind"
	"github.com/ambientmc/ambientmc/topology"
)

func main() {
	n := flag.Int("clusters", 2, "clusters cluster-1..N, each on its own network")
	topoFile := flag.String("topology", "", "a topology file instead of -clusters (its networks are kept)")
	out := flag.String("out", "", "directory for the clusters' files and the topology file (required)")
	flag.Parse()
	if err := run(*n, *topoFile, *out); err != nil {
		fmt.Fprintln(os.Stderr, "kindup:", err)
		os.Exit(1)
	}
}

func run(n int, topoFile, out string) error {
	if out == "" {
		return fmt.Errorf("-out is required: the directory for the kubeconfigs and topology.yaml")
	}
	var t *topology.Topology
	var err error
	if topoFile != "" {
		t, err = topology.Load(topoFile)
	} else {
		t, err = topology.Generate(n)
	}
	if err != nil {
		return err
	}
	built, err := images.Default()
	if err != nil {
		return err
	}
	// Give the stop signals a handler before anything exists, so nothing is left behind.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	// The Istio images only say what preflight checks the nodes hold: the kube provider installs
	// them. The data plane's archive is loaded as in a kind run, for the built ztunnel and gateway.
	p := kind.New(kind.Options{RunDir: filepath.Join(out, "kind"), Log: os.Stdout, Built: built, DataPlane: built.DataPlane, Istio: install.OrBuilt(install.Images{}, built)})
	defer func() {
		if err := p.Destroy(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "kindup:", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-sig; cancel() }()
	if err := p.Preflight(ctx, t); err != nil {
		return err
	}
	start := time.Now()
	cs, err := p.Create(ctx, t)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# kind clusters made by scripts/kindup; deleted when it stops\nclusters:\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "- name: %s\n  network: %s\n  kubeconfig: %s\n", c.Name, c.Network, c.InternalKubeconfig)
	}
	path := filepath.Join(out, "topology.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("kindup: %d clusters ready in %.0fs; topology %s; stop me (SIGINT, SIGTERM) to delete them\n", len(cs), time.Since(start).Seconds(), path)
	<-ctx.Done()
	return nil
}
