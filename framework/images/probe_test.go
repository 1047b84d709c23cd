package images_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/gomod"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
)

// The probe image make images builds carries the name the probe pods ask for, and its fortio is
// the one the local provider runs in process: a bump of either module fails here, not in a pod
// waiting for an image no one built.
func TestProbeImageIsTheOneProbesAskFor(t *testing.T) {
	c, err := bins.Default()
	require.NoError(t, err)
	s, err := images.Expected(c)
	require.NoError(t, err)
	require.Equal(t, install.DefaultProbeImage, s.Probe)
	main, err := gomod.Required(filepath.Join(c.SrcRoot, "go.mod"), "fortio.org/fortio")
	require.NoError(t, err)
	require.Equal(t, "fortio/fortio:"+main[1:], s.Probe, "scripts/nodebin/fortio must require the main go.mod's fortio")
}
