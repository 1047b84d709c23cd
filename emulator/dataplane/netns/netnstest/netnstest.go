// Package netnstest makes network namespaces for tests.
package netnstest

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// New creates a fresh network namespace with lo up, held only by the returned file, which the
// test's cleanup closes (after the sockets in it, if they were opened later), removing it. It
// skips the test where namespaces cannot be made (not root, or no permission).
func New(t *testing.T) *os.File {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a network namespace needs root")
	}
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result)
	go func() {
		// The thread is never switched back: it stays locked and ends with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		if err := loUp(); err != nil {
			ch <- result{err: err}
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		ch <- result{f, err}
	}()
	r := <-ch
	if errors.Is(r.err, unix.EPERM) {
		t.Skipf("cannot create a network namespace here: %v", r.err)
	}
	require.NoError(t, r.err)
	t.Cleanup(func() { r.f.Close() })
	return r.f
}

// loUp brings up lo of the calling thread's network namespace.
func loUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
