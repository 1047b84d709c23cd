// Package multicluster holds the suites users run against an ambient multicluster mesh:
//
//	go test ./suites/multicluster -clusters=10
//
// TestMain builds the environment from flags (see framework/env) before any test runs: clusters,
// then the mesh (shared CA, east-west gateways), the scale workloads, and istiod per primary.
// Clusters start unjoined; the tests join them.
package multicluster

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/proc"
)

// mc is the environment every test of this package runs against.
var mc *env.Env

func TestMain(m *testing.M) {
	// Traffic stays on loopback: every socket of this process and of every process the framework
	// starts is watched from setup to teardown, and a connection to any other address fails the run.
	watch := proc.WatchConnections(250 * time.Millisecond)
	code := env.Run(m, &mc,
		env.Step{Name: "mesh", Run: installMesh},
		env.Step{Name: "workloads", Run: deployWorkloads},
		env.Step{Name: "istiod", Run: startIstiods},
	)
	os.Exit(checkLoopback(watch.Stop(), code))
}

// checkLoopback reports what the connection watch saw and fails the run on any connection whose
// peer was not on loopback.
func checkLoopback(r proc.ConnReport, code int) int {
	if r.Err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: connection watch: reading the socket tables: %v\n", r.Err)
		return 1
	}
	if len(r.OffLoopback) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d connections left loopback (traffic must stay on 127.0.0.0/8):\n", len(r.OffLoopback))
		for _, c := range r.OffLoopback {
			fmt.Fprintf(os.Stderr, "  %s: %s\n", r.Names[c.Pid], c)
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "ambientmc: connection watch: %d samples of %d processes saw %d connections, all on loopback\n", r.Samples, r.Processes, r.Connections)
	return code
}
