// Package multicluster holds the suites users run against an ambient multicluster mesh:
//
//	go test ./suites/multicluster -clusters=10
//
// TestMain builds the environment from flags (see framework/env) before any test runs: clusters,
// then the mesh (shared CA, east-west gateways), the scale workloads, and istiod per primary.
// Clusters start unjoined; the tests join them.
package multicluster

import (
	"os"
	"testing"

	"github.com/ambientmc/ambientmc/framework/env"
)

// mc is the environment every test of this package runs against.
var mc *env.Env

func TestMain(m *testing.M) {
	os.Exit(env.Run(m, &mc, env.Suite{Steps: []env.Step{
		{Name: "mesh", Run: installMesh},
		{Name: "workloads", Run: deployWorkloads},
		{Name: "istiod", Run: startIstiods},
	}}))
}
