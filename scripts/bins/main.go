// Command bins pre-builds the binaries the local provider runs (kube-apiserver, etcd,
// pilot-discovery) into the ambientmc cache, so that suites start without a cold build.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/ambientmc/ambientmc/framework/bins"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cache, err := bins.Default()
	if err == nil {
		var paths map[bins.Binary]string
		if paths, err = cache.Ensure(ctx, bins.All...); err == nil {
			for _, b := range bins.All {
				fmt.Printf("%-16s %s\n", b, paths[b])
			}
			return
		}
	}
	fmt.Fprintln(os.Stderr, "bins:", err)
	os.Exit(1)
}
