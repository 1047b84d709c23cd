// Command images builds every image a kind run needs from the pinned sources and the
// distribution's packages, with nothing pulled (`make images`), and caches them by content: a
// second run with nothing changed returns at once.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cache, err := bins.Default()
	if err == nil {
		var s images.Set
		s, err = (&images.Builder{Cache: cache, Log: os.Stdout}).Build(ctx)
		if err == nil {
			fmt.Printf("node image  %s\nIstio       -istio.hub=%s -istio.tag=%s (pilot and install-cni preloaded in the node; the emulated data plane as ztunnel and proxyv2 in %s, loaded into the nodes at the start)\nprobes      %s (preloaded)\n", s.Node, s.IstioHub, s.IstioTag, s.DataPlane, s.Probe)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}
