//go:build tools

// Package cniplugins pins the CNI plugins a kind node uses: bridge with host-local addresses
// (the framework's clusters run no kindnetd), loopback and portmap.
package cniplugins

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
