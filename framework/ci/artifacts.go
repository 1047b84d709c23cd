package ci

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ambientmc/ambientmc/framework/env"
)

// copyLogsToArtifacts is a cleanup registered after the run directory's removal, so it runs
// after every component stopped and before the directory goes: with $ARTIFACTS, every
// component's log (and the providers' cluster dumps, which keepLogs had kind export into the run
// directory while the clusters still ran) is copied to $ARTIFACTS/logs, on pass and failure.
func copyLogsToArtifacts(e *env.Env) error {
	dst := filepath.Join(e.ReportDir, LogsDir)
	if err := copyLogs(e.RunDir, dst); err != nil {
		return err
	}
	e.Logf("artifacts: component logs copied to %s", dst)
	return nil
}

// Finished runs after teardown: without $ARTIFACTS, a failed run's report names the run directory
// it kept (with $ARTIFACTS it names the copy from the start).
func (c *Steps) Finished(e *env.Env, code int) {
	failed := code != 0 || e.KeepsRunDir()
	if !failed || e.RunDir == "" || e.Report == nil || e.Report.Artifacts == nil || e.Report.Artifacts.Logs != "" {
		return
	}
	e.Report.Artifacts.Logs = e.RunDir
	if err := e.WriteReport(); err != nil {
		e.Logf("writing the report: %v", err)
	}
}

// copyLogs copies the readable files of src into dst: logs, configs and certificates, but no
// credential (files only their owner may read: keys, tokens, kubeconfigs) and no etcd data,
// since CI artifacts are often public.
func copyLogs(src, dst string) error {
	var errs []error
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == "data" && rel != "." { // etcd's data directory: the database, not a log
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o044 == 0 {
			return nil
		}
		if err := copyFile(path, filepath.Join(dst, rel)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel, err))
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
