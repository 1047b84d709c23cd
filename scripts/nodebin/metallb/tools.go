//go:build tools

// Package metallb pins MetalLB at the version the pinned Istio's metallb-native.yaml names.
package metallb

import (
	_ "go.universe.tf/metallb/controller"
	_ "go.universe.tf/metallb/speaker"
)
