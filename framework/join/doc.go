// Package join is how the suites join and leave clusters and judge a change converged: what a
// ztunnel-like client of istiod must hold of each cluster (Expect), how long a step waits for
// istiod to settle before it samples it (Settler), the waits for a join or a leave to show, and a
// watch of what istiod says of a remote cluster's sync against what the framework knows.
package join

import (
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
)

// Istiod is an istiod the method reads: the provider's handle and its sampler (a mesh.Istiod, or
// anything that embeds one).
type Istiod interface {
	cluster.Istiod
	Sampler() *measure.Istiod
}
