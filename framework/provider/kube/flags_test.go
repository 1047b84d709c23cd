package kube

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKubeFlagsNameTheFlagAndTheFix(t *testing.T) {
	for _, name := range []string{"istio.platform", "kube.reuse-istio", "istio.hub", "istio.tag", "istio.variant"} {
		assert.NotNil(t, flag.CommandLine.Lookup(name), "-%s on the suite's flag set", name)
	}
	f := &flagValues{}
	f.register(flag.NewFlagSet("test", flag.ContinueOnError))
	require.NoError(t, f.validate(), "the defaults are valid")
	setFlag := func(name, v string) {
		old := flag.CommandLine.Lookup(name).Value.String()
		require.NoError(t, flag.CommandLine.Set(name, v))
		t.Cleanup(func() { _ = flag.CommandLine.Set(name, old) })
	}
	setFlag("istio.hub", "registry.istio.io/testing")
	setFlag("istio.tag", "1.31-dev")
	require.NoError(t, f.validate(), "a hub and a tag")
	f.platform = "openshift"
	require.NoError(t, f.validate())
	f.platform = "eks"
	assert.EqualError(t, f.validate(), "-istio.platform=eks: not one of Istio's platforms (gke, k3d, k3s, microk8s, minikube, openshift); leave it empty for clusters that need no platform settings")

	f.platform = ""
	setFlag("istio.tag", "")
	assert.EqualError(t, f.validate(), "-provider=kube installs Istio from images: pass -istio.tag (e.g. -istio.tag=1.31-dev or a full commit SHA) too, or neither for the images make images builds")
}
