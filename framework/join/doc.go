// Package join is how the suites join and leave clusters and the one place that judges a change
// converged: what a ztunnel-like client of istiod must hold of each cluster (Expect), the waits for
// a join or a leave to show, when istiod has settled after one before it is sampled (Settler,
// WaitQuiet) and how long a steady-CPU window must be (SteadyWindow), and a watch of what istiod
// says of a remote cluster's sync against what the framework knows. It reads istiod through its
// one handle, mesh.Istiod, and that handle's sensors (measure.Sampler).
package join
