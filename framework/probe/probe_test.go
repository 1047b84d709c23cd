package probe

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

func TestChooseServersTakesTheFirstPrimaryOfEachRelationWithAnIstiod(t *testing.T) {
	c := func(name, network, primary string) *cluster.Cluster {
		return &cluster.Cluster{Cluster: topology.Cluster{Name: name, Network: network, Primary: primary}}
	}
	local, remote := c("c1", "n1", ""), c("c2", "n2", "")
	peer, noIstiod, config := c("c3", "n1", ""), c("c4", "n2", ""), c("c5", "n1", "c1")
	s := Setup{Clusters: []*cluster.Cluster{local, noIstiod, config, remote, peer}, Local: local}
	s.ChooseServers(func(c *cluster.Cluster) bool { return c != noIstiod })
	assert.Equal(t, remote, s.Remote, "another network: the first primary with an istiod")
	assert.Equal(t, peer, s.Peer, "the client's network: a primary, not a remote cluster")
	assert.Equal(t, remote, s.Failover())
	assert.Equal(t, []*cluster.Cluster{local, remote, peer}, s.Servers())

	alone := Setup{Clusters: []*cluster.Cluster{local, config}, Local: local}
	alone.ChooseServers(func(*cluster.Cluster) bool { return true })
	assert.Nil(t, alone.Failover(), "no server besides the client's cluster")
}
