// Package proc runs supervised local processes (etcd, kube-apiserver, istiod): it starts them with
// their output in a log file, waits until a probe says they are ready, samples their CPU and memory,
// and stops them so that nothing is left behind.
//
// Every process runs in its own process group, so a stop reaches anything it spawned, and carries
// Pdeathsig=SIGKILL, so it dies with the test binary even when that binary is killed with -9 or by
// go test's -timeout. Because the groups are separate, a terminal's Ctrl-C reaches only the test
// binary; TrapSignals turns that signal into an orderly StopAll.
//
// Typical use:
//
//	p, err := proc.Start(proc.Spec{Name: "cluster-1/etcd", Path: etcdBin, Args: args, LogFile: logPath})
//	if err != nil { ... }
//	defer p.Stop(5 * time.Second)
//	if err := p.WaitReady(ctx, 100*time.Millisecond, probeHealthz); err != nil { ... }
package proc
