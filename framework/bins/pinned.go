package bins

import (
	"runtime/debug"
)

// PinnedIstioVersion is the istio.io/istio version the main go.mod pins, from which the default
// pilot-discovery is built: from the running binary's build info when it links Istio, else from
// the checkout's go.mod.
func PinnedIstioVersion() (string, error) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "istio.io/istio" {
				if d.Replace != nil {
					return d.Replace.Version, nil
				}
				return d.Version, nil
			}
		}
	}
	root, err := SourceRoot()
	if err != nil {
		return "", err
	}
	return (&Cache{SrcRoot: root}).requiredVersion(recipe{moduleDir: "."}, "istio.io/istio")
}
