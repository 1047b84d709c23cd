// Package multicluster holds the suites users run against an ambient multicluster mesh:
//
//	go test ./suites/multicluster -clusters=10
//
// TestMain builds the environment from flags (see framework/env) before any test runs.
package multicluster

import (
	"os"
	"testing"

	"github.com/ambientmc/ambientmc/framework/env"
)

// mc is the environment every test of this package runs against.
var mc *env.Env

func TestMain(m *testing.M) {
	os.Exit(env.Run(m, &mc))
}
