// Command kept removes what a kind run with -keep left: its clusters' containers, its docker
// network, and the host's kernel settings and /lib/modules its kubelets and Docker changed, put
// back as they were before the run. The run prints this command and writes it to kept.json.
//
//	go run ./scripts/kept -remove DIR   # DIR: the kept run's directory the run named
//	go run ./scripts/kept               # list the kept runs and their removal commands
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ambientmc/ambientmc/framework/provider/kind"
)

func main() {
	remove := flag.String("remove", "", "the kept run's directory to remove (the -keep message and kept.json name it)")
	flag.Parse()
	if err := run(*remove); err != nil {
		fmt.Fprintln(os.Stderr, "kept:", err)
		os.Exit(1)
	}
}

func run(remove string) error {
	if remove != "" {
		return kind.RemoveKept(context.Background(), remove, os.Stdout)
	}
	root, err := kind.KeptRoot()
	if err != nil {
		return err
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "state.json"))
	if len(dirs) == 0 {
		fmt.Printf("no kept runs in %s\n", root)
	}
	for _, d := range dirs {
		fmt.Println(kind.RemoveCommand(filepath.Dir(d)))
	}
	return nil
}
