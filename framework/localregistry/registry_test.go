package localregistry

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// containerd names Docker Hub's host docker.io; a mirror for index.docker.io would never be asked.
func TestHostsAreContainerdsNames(t *testing.T) {
	hosts, err := Hosts([]string{"example.com/me/pilot:dev", "fortio/fortio:1.75.3", "example.com/me/ztunnel:dev", "localhost:5000/me/pilot:dev"})
	require.NoError(t, err)
	require.Equal(t, []string{"example.com", "docker.io", "localhost:5000"}, hosts)
}

// A pushed image keeps its repository and tag, its host left out: the host's mirror serves it.
func TestTagLeavesTheHostOut(t *testing.T) {
	r := &Registry{Addr: netip.MustParseAddrPort("172.31.0.2:5000")}
	tag, err := r.Tag("example.com/me/pilot:dev")
	require.NoError(t, err)
	require.Equal(t, "172.31.0.2:5000/me/pilot:dev", tag.String())
	require.Contains(t, r.MirrorScript([]string{"example.com"}), `/etc/containerd/certs.d/example.com/hosts.toml`)
}
