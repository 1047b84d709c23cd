//go:build tools

// Package crictl pins the crictl kind v0.33's node image ships.
package crictl

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
