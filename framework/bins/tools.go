//go:build tools

package bins

// pilot-discovery is built from this module's pinned istio.io/istio, so its packages must stay in go.sum.
import _ "istio.io/istio/pilot/cmd/pilot-discovery"
