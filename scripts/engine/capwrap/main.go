// Command capwrap is an OCI runtime that runs runc after removing, from the container's process
// spec, every capability outside its own capability bounding set. A privileged container asks runc
// for every capability the kernel knows; where the host's bounding set lacks one (CAP_SYS_RESOURCE
// on this project's machines), runc fails with "unable to apply caps: operation not permitted" and
// no kind node can start. `make engine` registers it as dockerd's default runtime only on such
// hosts.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/ambientmc/ambientmc/scripts/engine/caps"
)

func main() {
	runc, err := exec.LookPath("runc")
	if err != nil {
		fail(fmt.Errorf("runc not on PATH: %w", err))
	}
	bounding, err := caps.Bounding()
	if err != nil {
		fail(err)
	}
	for _, f := range caps.SpecFiles(os.Args[1:]) {
		if err := caps.StripFile(f, bounding); err != nil {
			fail(fmt.Errorf("%s: %w", filepath.Base(f), err))
		}
	}
	fail(syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ()))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "capwrap:", err)
	os.Exit(1)
}
