package proc

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// signalGrace is the grace StopAll gets after SIGINT or SIGTERM.
const signalGrace = 5 * time.Second

// interrupt.ch is closed when TrapSignals starts handling a signal (holdIfInterrupted waits on it).
var interrupt struct {
	once sync.Once
	ch   chan struct{}
}

func init() { interrupt.ch = make(chan struct{}) }

// TrapSignals handles SIGINT and SIGTERM until release is called: it runs onSignal (the caller's
// cleanup; may be nil), then StopAll(5s), then exits with 128+signal (130 for SIGINT, 143 for
// SIGTERM). A second signal during that cleanup kills every process group at once and exits.
//
// It is needed because each child runs in its own process group: a terminal's Ctrl-C reaches the
// test binary only, and without a handler the binary would die and leave the children to
// Pdeathsig, with no graceful stop and no cleanup by the caller. Install it once, e.g. in TestMain.
// While the signal is handled, WaitReady calls whose process StopAll ends do not return, so the
// exit code stays the signal's.
func TrapSignals(onSignal func(os.Signal)) (release func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		var sig os.Signal
		select {
		case sig = <-ch:
		case <-quit:
			return
		}
		interrupt.once.Do(func() { close(interrupt.ch) })
		go func() {
			// An impatient second Ctrl-C: no more grace.
			second := <-ch
			killAll()
			os.Exit(exitCode(second))
		}()
		if onSignal != nil {
			onSignal(sig)
		}
		StopAll(signalGrace)
		os.Exit(exitCode(sig))
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(quit)
		})
	}
}

// exitCode is the shell's convention for death by signal.
func exitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}
