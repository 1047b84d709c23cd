package measure

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestCPURateIsCPUSecondsOverWallSeconds(t *testing.T) {
	t0 := time.Date(2026, 8, 27, 12, 0, 0, 0, time.UTC)
	a := &Metrics{At: t0, CPUSecondsTotal: 100}
	b := &Metrics{At: t0.Add(30 * time.Second), CPUSecondsTotal: 100.6}
	assert.InDelta(t, 0.02, CPURate(a, b), 1e-12)

	// A 2.5-core burst over 2 s.
	c := &Metrics{At: t0.Add(32 * time.Second), CPUSecondsTotal: 105.6}
	assert.InDelta(t, 2.5, CPURate(b, c), 1e-12)
}

func TestCPURateIsNaNForWindowsThatCannotBeMeasured(t *testing.T) {
	t0 := time.Now()
	a := &Metrics{At: t0, CPUSecondsTotal: 10}
	assert.True(t, math.IsNaN(CPURate(a, a)), "zero wall time")
	assert.True(t, math.IsNaN(CPURate(&Metrics{At: t0.Add(time.Second), CPUSecondsTotal: 11}, a)), "reversed")
	assert.True(t, math.IsNaN(CPURate(a, &Metrics{At: t0.Add(time.Second), CPUSecondsTotal: 2})), "counter reset")
	assert.True(t, math.IsNaN(CPURate(nil, a)))
}

func TestSpanBetweenCarriesResolution(t *testing.T) {
	t0 := time.Date(2026, 8, 27, 12, 0, 0, 0, time.UTC)
	a := CPUReading{At: t0, Seconds: 40, Resolution: 1e-9}
	b := CPUReading{At: t0.Add(4 * time.Second), Seconds: 40.0008, Resolution: MetricCPUResolution}
	s, err := SpanBetween(a, b)
	require.NoError(t, err)
	assert.InDelta(t, 0.0008, s.CPUSeconds, 1e-12)
	assert.InDelta(t, 0.0002, s.Cores(), 1e-12)
	// The coarser reading decides: 10 ms over 4 s cannot tell 0 from 0.0025 cores.
	assert.Equal(t, MetricCPUResolution, s.Resolution)
	assert.InDelta(t, 0.0025, s.CoresResolution(), 1e-15)

	_, err = SpanBetween(b, a)
	assert.ErrorContains(t, err, "not after its start")
	_, err = SpanBetween(a, CPUReading{At: t0.Add(time.Second), Seconds: 1})
	assert.ErrorContains(t, err, "restarted")
	_, err = SpanBetween(CPUReading{}, b)
	assert.Error(t, err)
}

func TestIstiodFallsBackToTheMetricWithItsResolution(t *testing.T) {
	var scrapes atomic.Int64
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveText(w, exposition(37.42+float64(scrapes.Add(1)), 3e8, 2e8, fixtureSynced))
	}))
	i := &Sampler{Name: "cluster-1", MetricsURL: srv.URL}
	r, err := i.ReadCPU(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 38.42, r.Seconds)
	assert.Equal(t, MetricCPUResolution, r.Resolution)
	assert.Equal(t, MetricCPUSeconds, r.Source)
	assert.False(t, r.At.IsZero())

	i.CPU = NewSchedstat(os.Getpid())
	r, err = i.ReadCPU(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "schedstat", r.Source)
	assert.Equal(t, SchedstatResolution, r.Resolution)
	assert.Equal(t, int64(1), scrapes.Load(), "a CPU source set means no scrape for CPU")
}

// onOtherThread runs f on an OS thread that is not the thread group leader, so that
// /proc/PID/schedstat (the leader's alone) cannot see its CPU time. With exit, the thread ends
// afterwards (a goroutine that returns while locked takes its thread with it).
func onOtherThread(t *testing.T, exit bool, f func(tid int)) {
	t.Helper()
	done := make(chan struct{})
	var hold []chan struct{} // goroutines parked on the leader, released at the end
	defer func() {
		for _, c := range hold {
			close(c)
		}
	}()
	for range 8 {
		got := make(chan bool)
		release := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == os.Getpid() {
				got <- false
				<-release
				runtime.UnlockOSThread()
				return
			}
			got <- true
			f(unix.Gettid())
			if !exit {
				runtime.UnlockOSThread()
			}
			close(done)
		}()
		if <-got {
			<-done
			return
		}
		hold = append(hold, release)
	}
	t.Fatal("no goroutine got a thread other than the leader")
}

// spinThreadCPU burns d of this thread's CPU time, measured by the thread's own CPU clock (an
// independent kernel source); the caller keeps the goroutine on its thread (LockOSThread).
func spinThreadCPU(d time.Duration) {
	start := threadCPU()
	for threadCPU()-start < d {
	}
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

func leaderRuntime(t *testing.T) float64 {
	ns, err := readRuntime(fmt.Sprintf("/proc/%d/schedstat", os.Getpid()))
	require.NoError(t, err)
	return float64(ns) * 1e-9
}

// /proc/PID/schedstat holds the leader thread's runtime only: a Go process's work runs on other
// threads, so reading that file alone would miss it.
func TestSchedstatCountsEveryThread(t *testing.T) {
	s := NewSchedstat(os.Getpid())
	ctx := context.Background()
	before, err := s.CPUSeconds(ctx)
	require.NoError(t, err)
	leaderBefore := leaderRuntime(t)
	const spin = 150 * time.Millisecond
	onOtherThread(t, false, func(int) { spinThreadCPU(spin) })
	after, err := s.CPUSeconds(ctx)
	require.NoError(t, err)
	leaderAfter := leaderRuntime(t)

	assert.GreaterOrEqual(t, after-before, spin.Seconds()*0.99, "the spinning thread's CPU time")
	assert.Less(t, leaderAfter-leaderBefore, spin.Seconds()/2, "the leader's schedstat alone does not see other threads")
}

// processClock reads another process's CPU clock (clock_getcpuclockid: the kernel's process-wide
// runtime, exited threads included), an independent nanosecond reference.
func processClock(t *testing.T, pid int) float64 {
	var ts unix.Timespec
	require.NoError(t, unix.ClockGettime(int32(^pid<<3|2), &ts)) // CPUCLOCK_SCHED of pid
	return float64(ts.Nano()) * 1e-9
}

// Below one 10 ms tick: another process (as istiod is) spins 3 ms of CPU between two reads, and
// Schedstat agrees with the kernel's process CPU clock to a fraction of a millisecond, where
// process_cpu_seconds_total would show 0 or 10 ms. The child is off CPU at the reads, so the
// counters are exact there.
func TestSchedstatResolvesBelowATick(t *testing.T) {
	const childEnv = "AMBIENTMC_SCHEDSTAT_CHILD"
	if os.Getenv(childEnv) == "1" {
		// Child: spin 3 ms of CPU per byte read, answer, and wait for the next. The spin counts
		// its own thread's clock, so the goroutine must not move to another thread mid-spin (a
		// busier thread's clock ended one early: 2.937 ms, in a CI run).
		runtime.LockOSThread()
		buf := make([]byte, 1)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				os.Exit(0)
			}
			spinThreadCPU(3 * time.Millisecond)
			_, _ = os.Stdout.Write(buf)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSchedstatResolvesBelowATick$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })

	pid := cmd.Process.Pid
	s := NewSchedstat(pid)
	ctx := context.Background()
	read := func() (float64, float64) {
		v, err := s.CPUSeconds(ctx)
		require.NoError(t, err)
		return v, processClock(t, pid)
	}
	for k := range 4 {
		before, clockBefore := read()
		_, err = in.Write([]byte{'x'})
		require.NoError(t, err)
		_, err = io.ReadFull(out, make([]byte, 1))
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond) // let the child block again
		after, clockAfter := read()
		if k == 0 {
			continue // the child's start-up
		}
		d, ref := after-before, clockAfter-clockBefore
		assert.GreaterOrEqual(t, d, 0.003, "the 3 ms spin")
		assert.InDelta(t, ref, d, 0.0005, "schedstat %.6f s, process clock %.6f s", d, ref)
	}
}

// A thread that exits takes its counter with it; the total must not fall.
func TestSchedstatKeepsDepartedThreads(t *testing.T) {
	s := NewSchedstat(os.Getpid())
	ctx := context.Background()
	_, err := s.CPUSeconds(ctx)
	require.NoError(t, err)
	var withThread float64
	var tid int
	onOtherThread(t, true, func(id int) {
		tid = id
		spinThreadCPU(100 * time.Millisecond)
		withThread, err = s.CPUSeconds(ctx)
	})
	require.NoError(t, err)
	// The locked goroutine returned, so the runtime ends its thread.
	require.Eventually(t, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", os.Getpid(), tid))
		return os.IsNotExist(err)
	}, 5*time.Second, 10*time.Millisecond, "thread %d did not exit", tid)
	afterExit, err := s.CPUSeconds(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, afterExit, withThread, "total fell when a thread exited")
}

func TestSchedstatRefusesAnotherProcessUnderTheSamePID(t *testing.T) {
	s := NewSchedstat(os.Getpid())
	_, err := s.CPUSeconds(context.Background())
	require.NoError(t, err)
	s.startTime = "1" // as if the PID now named a process started at another time
	_, err = s.CPUSeconds(context.Background())
	assert.ErrorContains(t, err, "PID reused")

	_, err = NewSchedstat(1 << 30).CPUSeconds(context.Background())
	assert.Error(t, err)
}

// The sum over threads agrees with the kernel's own process-wide CPU clock (which also counts
// exited threads), to within a scheduler tick of the threads running at either read.
func TestSchedstatAgreesWithTheProcessCPUClock(t *testing.T) {
	processCPU := func() float64 {
		var ts unix.Timespec
		require.NoError(t, unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts))
		return float64(ts.Nano()) * 1e-9
	}
	s := NewSchedstat(os.Getpid())
	ctx := context.Background()
	a, err := s.CPUSeconds(ctx)
	require.NoError(t, err)
	ca := processCPU()
	onOtherThread(t, false, func(int) { spinThreadCPU(120 * time.Millisecond) })
	b, err := s.CPUSeconds(ctx)
	require.NoError(t, err)
	cb := processCPU()
	// The reading thread is on a CPU at both reads: its own counter may lag by up to a tick
	// (10 ms at HZ=100), far below the 120 ms a leader-only reading would miss.
	assert.InDelta(t, cb-ca, b-a, 0.015, "schedstat %.6f s, process clock %.6f s", b-a, cb-ca)
}
