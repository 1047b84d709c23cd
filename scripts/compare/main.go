// Command compare runs the same suite experiment against two istiods, alternating A, B, A, B for
// a number of rounds (so drift on the host hits both alike), each round into its own report
// directory, then writes benchstat's comparison of the two sets of bench lines and a Markdown
// table of the figures that matter for an istiod change:
//
//	make compare A=<version|path> B=<version|path> ROUNDS=3 SUITE_FLAGS="-clusters=3 -run TestControlPlaneJoin"
//	go run ./scripts/compare -a=... -b=... -rounds=3 -out=_output/compare -- -clusters=3 -run TestControlPlaneJoin
//
// A side is an istio.io/istio module version (built through its wrapper, see scripts/istiod) or
// a path to a pilot-discovery binary (anything containing a slash).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/scripts/internal/suiterun"
)

type side struct {
	Label string // A or B
	Arg   string
	Spec  bins.IstiodSpec
	Build *bins.IstiodBuild
	Dirs  []string // report dir of each finished round
}

func main() {
	a := flag.String("a", "", "istiod A: an istio.io/istio module version, or a path to a pilot-discovery")
	b := flag.String("b", "", "istiod B: an istio.io/istio module version, or a path to a pilot-discovery")
	rounds := flag.Int("rounds", 3, "rounds; each runs the suite once against A, then once against B")
	out := flag.String("out", "_output/compare", "output directory (emptied first)")
	timeout := flag.Duration("timeout", 60*time.Minute, "go test -timeout of each run")
	failOnFlag := flag.String("fail-on", "", "what may regress from A (the base) to B (the change): NAME:UNIT+PCT%,... or a gates file's baseline: section; a significant regression beyond it fails (FAIL_ON)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fo, err := parseFailOn(*failOnFlag, *rounds)
	if err == nil {
		err = run(ctx, *a, *b, *rounds, *out, *timeout, flag.Args(), fo)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func specOf(flagName, arg string) (bins.IstiodSpec, error) {
	switch {
	case arg == "":
		return bins.IstiodSpec{}, fmt.Errorf("%s is empty: give an istio.io/istio module version or a path to a pilot-discovery (make compare A=... B=...)", flagName)
	case strings.Contains(arg, "/"):
		return bins.IstiodSpec{Binary: arg}, nil
	default:
		return bins.IstiodSpec{Version: arg}, nil
	}
}

func run(ctx context.Context, a, b string, rounds int, out string, timeout time.Duration, suiteFlags []string, fo *failOn) error {
	if rounds < 1 {
		return fmt.Errorf("-rounds=%d (ROUNDS): need at least 1", rounds)
	}
	for _, f := range suiteFlags {
		if strings.HasPrefix(f, "-istiod.") || strings.HasPrefix(f, "-report-dir") {
			return fmt.Errorf("SUITE_FLAGS has %s: compare sets -istiod.* and -report-dir itself; use A=, B= instead", f)
		}
	}
	root, err := bins.SourceRoot()
	if err != nil {
		return err
	}
	cache, err := bins.Default()
	if err != nil {
		return err
	}
	sides := []*side{{Label: "A", Arg: a}, {Label: "B", Arg: b}}
	// Check both before building either, then build both before any round: a bad B must not
	// cost a round of A first, and build time must not fall inside a round.
	for _, s := range sides {
		if s.Spec, err = specOf(s.Label, s.Arg); err != nil {
			return err
		}
		if err := cache.CheckIstiod(ctx, s.Spec); err != nil {
			return fmt.Errorf("%s=%s: %w", s.Label, s.Arg, err)
		}
	}
	for _, s := range sides {
		if s.Build, err = cache.Istiod(ctx, s.Spec); err != nil {
			return fmt.Errorf("%s=%s: %w", s.Label, s.Arg, err)
		}
		fmt.Printf("compare: %s = %s\n           %s\n", s.Label, s.Build.Path, s.Build.VersionOutput)
	}
	if out, err = suiterun.FreshDir(out); err != nil {
		return err
	}
	start := time.Now()
	for round := 1; round <= rounds; round++ {
		for _, s := range sides {
			dir := filepath.Join(out, fmt.Sprintf("%s-%d", strings.ToLower(s.Label), round))
			if err := suiteRun(ctx, root, s, dir, timeout, suiteFlags); err != nil {
				return fmt.Errorf("round %d, %s: %w", round, s.Label, err)
			}
			s.Dirs = append(s.Dirs, dir)
			fmt.Printf("compare: round %d/%d %s done (%s elapsed)\n", round, rounds, s.Label, time.Since(start).Round(time.Second))
		}
	}
	var benchFiles []string
	for _, s := range sides {
		f := filepath.Join(out, strings.ToLower(s.Label)+".bench.txt")
		if err := suiterun.ConcatBench(s.Dirs, f); err != nil {
			return err
		}
		benchFiles = append(benchFiles, s.Label+"="+f)
	}
	stat, err := suiterun.RunBenchstat(ctx, out, benchFiles)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "benchstat.txt"), stat, 0o644); err != nil {
		return err
	}
	md, err := markdown(sides, rounds, suiteFlags)
	if err != nil {
		return err
	}
	var broken int
	if fo != nil {
		var gs []report.Gate
		if gs, broken, err = fo.judge(out, filepath.Join(out, "a.bench.txt"), filepath.Join(out, "b.bench.txt")); err != nil {
			return err
		}
		md = append(md, gatesMarkdown(gs)...)
	}
	if err := os.WriteFile(filepath.Join(out, "compare.md"), md, 0o644); err != nil {
		return err
	}
	os.Stdout.Write(md)
	fmt.Printf("\ncompare: wrote %s/{compare.md,benchstat.txt,a.bench.txt,b.bench.txt} and one report dir per run\n", out)
	if broken > 0 {
		return fmt.Errorf("FAIL_ON: %d gates broken: B regressed significantly against A (junit.xml in %s)", broken, out)
	}
	return nil
}

// suiteRun runs the suite once against s, its output in dir/../<dir>.log.
func suiteRun(ctx context.Context, root string, s *side, dir string, timeout time.Duration, suiteFlags []string) error {
	flags := slices.Clone(suiteFlags)
	if s.Spec.Binary != "" {
		flags = append(flags, "-istiod.binary="+s.Build.Path)
	} else {
		flags = append(flags, "-istiod.version="+s.Build.ModuleVersion)
	}
	return suiterun.Run(ctx, root, dir, timeout, flags)
}
