package install

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The components wait for what Istio's installer makes them wait for, and nothing else.
func TestDependenciesFollowIstiosInstaller(t *testing.T) {
	m := &Manifests{}
	for _, n := range []string{ComponentGatewayAPICRDs, ComponentBase, ComponentIstiod, ComponentCNI, ComponentZtunnel, ComponentEastWestGateway, ComponentProbes, "extra"} {
		m.Components = append(m.Components, Component{Name: n})
	}
	deps := func(name string) []string {
		for i, comp := range m.Components {
			if comp.Name == name {
				var out []string
				for _, d := range m.dependencies(i) {
					out = append(out, m.Components[d].Name)
				}
				return out
			}
		}
		t.Fatalf("no component %s", name)
		return nil
	}
	assert.Empty(t, deps(ComponentGatewayAPICRDs))
	assert.Equal(t, []string{ComponentGatewayAPICRDs}, deps(ComponentBase))
	assert.Equal(t, []string{ComponentBase}, deps(ComponentIstiod))
	assert.Equal(t, []string{ComponentBase}, deps(ComponentCNI), "istio-cni installs beside istiod")
	assert.Equal(t, []string{ComponentCNI}, deps(ComponentZtunnel), "ztunnel waits for istio-cni, not istiod")
	assert.Equal(t, []string{ComponentIstiod}, deps(ComponentEastWestGateway))
	assert.Equal(t, []string{ComponentZtunnel, ComponentEastWestGateway}, deps(ComponentProbes))
	assert.Len(t, deps("extra"), len(m.Components)-1, "a component the order does not name waits for every one before it")

	// A dependency applied by an earlier Apply is not in the manifests: nothing waits for it.
	only := &Manifests{Components: []Component{{Name: ComponentEastWestGateway}}}
	assert.Empty(t, only.dependencies(0))
}
