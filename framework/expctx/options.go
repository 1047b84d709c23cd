package expctx

import (
	"flag"
	"fmt"
	"time"
)

// Options are the suites' flags.
type Options struct {
	Join    Join
	Latency Latency
	Churn   Churn
	Checks  Checks
	// Waypoints deploys a waypoint for the global services in every cluster (one per scale
	// namespace), as Istio's multicluster docs do, each with its Envoy's client on its istiod.
	Waypoints bool
}

// Join configures TestControlPlaneJoin and TestControlPlaneLeave.
type Join struct {
	Timeout time.Duration // per join, until converged
	// Settle and Steady, when set, fix the windows: memory is sampled Settle after convergence
	// and steady CPU read over the Steady before that. Unset (0), a join settles when istiod's
	// CPU is back in its idle band (capped by the scale's settle) and the steady window is the
	// quiet stretch that ended the wait.
	Settle, Steady time.Duration
	Samples        int // memory samples per step
	XDSClients     int // ztunnel-like xDS clients on the observed istiod (0: by scale)
	// Repeats is how many join sequences TestControlPlaneJoin measures, each on an istiod started
	// fresh for it; with two or more the per-remote figures are their mean, and their standard
	// errors include the spread from one istiod to the next.
	Repeats int
}

// Latency configures TestLatency (Istio's data-plane benchmark defaults: 1 KB, 16 connections).
type Latency struct {
	Duration time.Duration
	// FloorDuration is the length of the harness-floor runs (fortio straight at the server).
	FloorDuration time.Duration
	QPS           float64
	Connections   int
	Payload       int
}

// Checks configures TestIstiodProperties.
type Checks struct {
	// Clusters is how many remote clusters the memory check joins and leaves (0: all).
	Clusters int
	// Rotations is how many times the rotation check rotates a remote secret in place, and
	// again how many times it deletes and recreates it.
	Rotations int
	// Controls runs every check's controls beside it: once with a fault injected (it must fail),
	// once with the fault kept away (it must pass).
	Controls bool
}

// Register registers the suites' flags on fs.
func Register(fs *flag.FlagSet) *Options {
	o := &Options{}
	fs.DurationVar(&o.Join.Timeout, "join.timeout", 2*time.Minute, "how long one join may take to converge")
	fs.DurationVar(&o.Join.Settle, "join.settle", 0, "fixed wait after convergence before sampling istiod (0: until istiod's CPU is back in its idle band, at most 6s small, 20s medium, 30s published)")
	fs.DurationVar(&o.Join.Steady, "join.steady", 0, "fixed steady-CPU window ending at the settle point (0: the quiet stretch that ended the settle, as long as the CPU source's resolution needs, at least 2s)")
	fs.IntVar(&o.Join.Samples, "join.samples", 3, "memory samples (half a second apart) per join; medians are reported")
	fs.IntVar(&o.Join.Repeats, "join.repeats", 1, "join sequences to measure, each on a fresh istiod; with 2 or more the per-remote figures are their mean and its standard error, which includes the spread between istiods (one sequence's fit cannot show it)")
	fs.IntVar(&o.Join.XDSClients, "join.xds-clients", 0, "ztunnel-like delta xDS clients connected to the observed istiod during the joins, as the fake ztunnels of Istio's published test (0: 15 at published scale, 1 otherwise)")
	fs.DurationVar(&o.Latency.Duration, "latency.duration", 5*time.Second, "length of each latency run (make e2e: 10s)")
	fs.DurationVar(&o.Latency.FloorDuration, "latency.floor-duration", 2*time.Second, "length of each harness-floor run (fortio straight at the echo server)")
	fs.Float64Var(&o.Latency.QPS, "latency.qps", 0, "requests per second of each latency run, all connections together (0: the highest rate up to 1000 this host carries, found by short probe steps)")
	fs.IntVar(&o.Latency.Connections, "latency.connections", 16, "concurrent connections of each latency run")
	fs.IntVar(&o.Latency.Payload, "latency.payload", 1024, "response size in bytes")
	fs.IntVar(&o.Checks.Clusters, "checks.clusters", 2, "remote clusters the istiod memory check joins and leaves (0: every cluster)")
	fs.IntVar(&o.Checks.Rotations, "checks.rotations", 2, "times the rotation check rotates a remote secret in place, and again deletes and recreates it (CI size; 1000 to hunt a leak by hand)")
	fs.BoolVar(&o.Checks.Controls, "checks.controls", false, "also run each istiod check with a fault injected (it must fail) and with the fault kept away (it must pass); make ci does")
	fs.BoolVar(&o.Waypoints, "waypoints", false, "deploy a waypoint for the global services in every cluster (one per scale namespace: a Gateway of class istio-waypoint, the namespace labelled istio.io/use-waypoint, its Service istio.io/global), as Istio's multicluster docs do, and connect each waypoint's Envoy client to its cluster's istiod")
	registerChurn(fs, &o.Churn)
	return o
}

// Validate reports flag values that cannot work, naming the flag and the fix.
func (o *Options) Validate() error {
	j, l := o.Join, o.Latency
	switch {
	case j.Timeout <= 0:
		return fmt.Errorf("-join.timeout=%s: must be positive, e.g. 2m", j.Timeout)
	case j.Settle < 0 || j.Steady < 0:
		return fmt.Errorf("-join.settle=%s -join.steady=%s: must be 0 (by istiod's CPU) or positive", j.Settle, j.Steady)
	case j.Steady > 0 && j.Settle > 0 && j.Steady > j.Settle:
		return fmt.Errorf("-join.steady=%s is longer than -join.settle=%s: the steady window must end at the settle point and start after convergence", j.Steady, j.Settle)
	case j.Samples < 1:
		return fmt.Errorf("-join.samples=%d: need at least 1", j.Samples)
	case j.Repeats < 1 || j.Repeats > 20:
		return fmt.Errorf("-join.repeats=%d: choose 1 to 20 join sequences (3 gives a standard error over istiods)", j.Repeats)
	case j.XDSClients < 0 || j.XDSClients > 200:
		return fmt.Errorf("-join.xds-clients=%d: choose 1 to 200, or 0 for the scale's default", j.XDSClients)
	case l.Duration <= 0:
		return fmt.Errorf("-latency.duration=%s: must be positive, e.g. 10s", l.Duration)
	case l.FloorDuration <= 0:
		return fmt.Errorf("-latency.floor-duration=%s: must be positive, e.g. 3s", l.FloorDuration)
	case l.QPS < 0:
		return fmt.Errorf("-latency.qps=%g: must be positive, or 0 to find the rate this host carries", l.QPS)
	case l.Connections < 1:
		return fmt.Errorf("-latency.connections=%d: need at least 1", l.Connections)
	case l.Payload < 0:
		return fmt.Errorf("-latency.payload=%d: must be 0 or more bytes", l.Payload)
	case o.Checks.Rotations < 1:
		return fmt.Errorf("-checks.rotations=%d: need at least 1", o.Checks.Rotations)
	case o.Checks.Clusters < 0:
		return fmt.Errorf("-checks.clusters=%d: 0 for every cluster, or how many remote clusters the memory check joins", o.Checks.Clusters)
	}
	return o.Churn.parse()
}
