package local

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLocalFlagsNameTheFlagAndTheFix(t *testing.T) {
	f := &flagValues{}
	f.register(flag.NewFlagSet("test", flag.ContinueOnError))
	require.NoError(t, f.validate(), "the defaults are valid")
	assert.True(t, f.controllers, "controller-managers run by default")
	f.wave = -1
	assert.EqualError(t, f.validate(), "-local.wave=-1: must be 0 (two per CPU, at most 4) or a positive number of clusters")
}
