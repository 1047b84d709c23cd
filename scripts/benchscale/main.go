// Command benchscale runs the control-plane join suite on the local provider at several cluster
// counts, one after another, and writes what each size costs as benchstat lines and one table:
// per-cluster memory and setup time, the observed istiod's per-remote slopes, and how a join's
// cost grows with the clusters already joined.
//
//	make bench-scale BENCH_CLUSTERS=1,10,25,50
//	go run ./scripts/benchscale -clusters=1,10,25,50 -out=_output/bench-scale -- -scale=small
//
// Each size runs `go test ./suites/multicluster -clusters=N -mesh.istiods=observed -run
// TestControlPlaneJoin` plus the flags after --, its report into out/clusters-N.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/bench"
	"github.com/ambientmc/ambientmc/scripts/internal/suiterun"
)

func main() {
	sizes := flag.String("clusters", "1,10,25,50", "comma-separated cluster counts, run in this order")
	out := flag.String("out", "_output/bench-scale", "output directory (emptied first)")
	timeout := flag.Duration("timeout", 60*time.Minute, "go test -timeout of each size")
	flag.Parse()
	ns, err := parseSizes(*sizes)
	if err == nil {
		err = checkFlags(flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, ns, *out, *timeout, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}

func parseSizes(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-clusters=%q (BENCH_CLUSTERS): %q is not a cluster count; give counts like 1,10,25,50", s, f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// checkFlags refuses suite flags that benchscale sets itself.
func checkFlags(suiteFlags []string) error {
	for _, f := range suiteFlags {
		for _, own := range []string{"-clusters", "-report-dir", "-provider"} {
			if f == own || strings.HasPrefix(f, own+"=") {
				return fmt.Errorf("suite flag %s: benchscale sets %s itself (it measures the local provider; use -clusters= for the sizes)", f, own)
			}
		}
	}
	return nil
}

func run(ctx context.Context, sizes []int, out string, timeout time.Duration, suiteFlags []string) error {
	root, err := bins.SourceRoot()
	if err != nil {
		return err
	}
	if out, err = suiterun.FreshDir(out); err != nil {
		return err
	}
	start := time.Now()
	var dirs []string
	var rows []row
	for i, n := range sizes {
		dir := filepath.Join(out, fmt.Sprintf("clusters-%d", n))
		flags := append([]string{"-clusters=" + strconv.Itoa(n), "-mesh.istiods=observed", "-run=TestControlPlaneJoin"}, suiteFlags...)
		began := time.Now()
		if err := suiterun.Run(ctx, root, dir, timeout, flags); err != nil {
			return fmt.Errorf("%d clusters: %w", n, err)
		}
		r, err := report.Read(filepath.Join(dir, "report.json"))
		if err != nil {
			return err
		}
		rows = append(rows, rowOf(n, time.Since(began), r))
		dirs = append(dirs, dir)
		fmt.Printf("benchscale: %d clusters done (%d/%d, %s elapsed)\n", n, i+1, len(sizes), time.Since(start).Round(time.Second))
	}
	lines := filepath.Join(out, bench.File)
	if err := suiterun.ConcatBench(dirs, lines); err != nil {
		return err
	}
	stat, err := suiterun.RunBenchstat(ctx, out, []string{lines})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "benchstat.txt"), stat, 0o644); err != nil {
		return err
	}
	md := markdown(rows, suiteFlags)
	if err := os.WriteFile(filepath.Join(out, "bench-scale.md"), md, 0o644); err != nil {
		return err
	}
	os.Stdout.Write(md)
	fmt.Printf("\nbenchscale: wrote %s/{bench-scale.md,%s,benchstat.txt} and one report dir per size\n", out, bench.File)
	return nil
}
