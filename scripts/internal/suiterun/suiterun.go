// Package suiterun runs the multicluster suite as a child `go test` for the scripts that repeat
// it (compare, benchscale), and reads what each run leaves: its bench lines, and benchstat's view.
package suiterun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/ci/baseline"
	"github.com/ambientmc/ambientmc/framework/report/bench"
)

// Benchstat is pinned so tables read the same on every machine (the module proxy serves it), at
// the version whose statistics the gates judge with.
const Benchstat = baseline.Benchstat

// Run runs the suite once from the source root with flags, its report into dir and its output
// into dir.log, and checks that it wrote its bench lines.
func Run(ctx context.Context, root, dir string, timeout time.Duration, flags []string) error {
	args := []string{"test", "-count=1", "-v", "-timeout=" + timeout.String(), "./suites/multicluster"}
	args = append(args, flags...)
	args = append(args, "-report-dir="+dir)
	logPath := dir + ".log"
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Printf("go %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the suite failed (%v); its output is in %s", err, logPath)
	}
	if _, err := os.Stat(filepath.Join(dir, bench.File)); err != nil {
		return fmt.Errorf("the suite wrote no %s into %s (see %s)", bench.File, dir, logPath)
	}
	return nil
}

// ConcatBench writes the bench lines of every report dir, in order, into dst.
func ConcatBench(dirs []string, dst string) error {
	var all []byte
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, bench.File))
		if err != nil {
			return err
		}
		all = append(all, b...)
	}
	return os.WriteFile(dst, all, 0o644)
}

// RunBenchstat returns benchstat's tables of files (each "label=path" or a path), run in dir.
func RunBenchstat(ctx context.Context, dir string, files []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", Benchstat}, files...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("benchstat (go run %s): %w\n%s", Benchstat, err, stderr.String())
	}
	return out, nil
}

// FreshDir empties out (creating it) and returns its absolute path.
func FreshDir(out string) (string, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(abs); err != nil {
		return "", err
	}
	return abs, os.MkdirAll(abs, 0o755)
}
