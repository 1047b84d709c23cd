package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// SetNice sets the CPU priority (nice value, -20 to 19) of every thread of process pid; threads it
// starts later inherit it from theirs. A negative value needs root or CAP_SYS_NICE.
func SetNice(pid, nice int) error {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
