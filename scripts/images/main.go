// Command images builds every image a kind run needs from the pinned sources and the
// distribution's packages, with nothing pulled (`make images`), and caches them by content: a
// second run with nothing changed returns at once.
//
// With -user.hub and -user.tag it instead puts the Istio images it builds into Docker's image
// store under a user's names (hub/pilot:tag, install-cni, ztunnel, proxyv2): offline, the stand-in
// for a user's own Istio build, which `-provider=kind -istio.hub=HUB -istio.tag=TAG` then finds
// there, as kind load docker-image would.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/images"
)

func main() {
	hub := flag.String("user.hub", "", "put the Istio images into Docker's image store as HUB/<image>:TAG (with -user.tag), as a user's own build would be")
	tag := flag.String("user.tag", "", "the tag of -user.hub's images")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cache, err := bins.Default()
	switch {
	case err != nil:
	case (*hub == "") != (*tag == ""):
		err = fmt.Errorf("-user.hub=%q -user.tag=%q: give both, e.g. -user.hub=example.com/me -user.tag=dev", *hub, *tag)
	case *hub != "":
		err = asUser(ctx, cache, *hub, *tag)
	default:
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

// asUser writes the Istio images as hub/<image>:tag and loads them into Docker's image store.
func asUser(ctx context.Context, cache *bins.Cache, hub, tag string) error {
	dir, err := os.MkdirTemp("", "ambientmc-user-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "istio.tar")
	if err := (&images.Builder{Cache: cache, Log: os.Stdout}).AsUserBuild(ctx, hub, tag, archive); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "docker", "image", "load", "-i", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker image load: %v: %s", err, out)
	}
	fmt.Printf("%sIstio       -istio.hub=%s -istio.tag=%s (in Docker's image store only)\n", out, hub, tag)
	return nil
}
