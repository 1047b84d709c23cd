package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Names of the files Write puts in the report directory.
const (
	JSONFile         = "report.json"
	MarkdownFile     = "report.md"
	BenchFile        = "bench.txt"
	ControlPlaneSVG  = "controlplane.svg"
	LatencySVG       = "latency.svg"
	benchPkg         = "github.com/ambientmc/ambientmc/suites/multicluster"
	bytesPerMB       = 1e6 // decimal MB, as the published 180 MB (180000000 bytes)
	missingCellValue = "-"
)

// Write validates r and writes report.json, report.md and bench.txt to dir (created if needed),
// plus controlplane.svg when the control plane has joins and latency.svg when latency has runs.
// A chart the run did not produce is removed, so a reused directory never shows a stale one.
// An invalid report is not written: a mislabelled data plane must not reach a reader. A NaN or
// Inf anywhere in r does not stop it: the value is left out (optional ones become nil in r) and
// r.Warnings says which field and why.
func Write(dir string, r *Report) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := marshalReport(r)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		JSONFile:     append(js, '\n'),
		MarkdownFile: Markdown(r),
		BenchFile:    Bench(r),
	}
	stale := []string{}
	if svg := controlPlaneSVG(r.ControlPlane); svg != nil {
		files[ControlPlaneSVG] = svg
	} else {
		stale = append(stale, ControlPlaneSVG)
	}
	if svg := latencySVG(r.Latency); svg != nil {
		files[LatencySVG] = svg
	} else {
		stale = append(stale, LatencySVG)
	}
	if svg := churnSVG(r.Churn); svg != nil {
		files[ChurnSVG] = svg
	} else {
		stale = append(stale, ChurnSVG)
	}
	if svg := rotationSVG(r.IstiodChecks); svg != nil {
		files[RotationSVG] = svg
	} else {
		stale = append(stale, RotationSVG)
	}
	var errs []error
	for name, b := range files {
		errs = append(errs, writeFile(filepath.Join(dir, name), b))
	}
	for _, name := range stale {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeFile writes through a temporary file and a rename, so a reader never sees half a report.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// hasJoins and hasRuns decide which charts exist; Markdown links only to charts Write produces.
func hasJoins(cp *ControlPlane) bool { return cp != nil && len(cp.Joins) > 0 }

func hasRuns(l *Latency) bool { return l != nil && len(l.Runs)+len(l.HarnessFloor) > 0 }
