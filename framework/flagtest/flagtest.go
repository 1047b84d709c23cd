// Package flagtest sets flags of the default flag set for one test, as a command line would.
package flagtest

import (
	"flag"
	"testing"
)

// Set sets the registered flag name to value for t and restores its old value when t ends.
func Set(t testing.TB, name, value string) {
	t.Helper()
	f := flag.CommandLine.Lookup(name)
	if f == nil {
		t.Fatalf("-%s is not registered on the default flag set", name)
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatalf("-%s=%s: %v", name, value, err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}
