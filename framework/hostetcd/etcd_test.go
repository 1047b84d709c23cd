package hostetcd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ambientmc/ambientmc/topology"
)

func TestEtcdPrefixesAreDisjoint(t *testing.T) {
	for i := 1; i <= topology.MaxClusters; i++ {
		for j := 1; j <= topology.MaxClusters; j++ {
			a, b := Prefix(fmt.Sprintf("cluster-%d", i))+"/", Prefix(fmt.Sprintf("cluster-%d", j))+"/"
			if i != j && (strings.HasPrefix(a, b) || strings.HasPrefix(b, a)) {
				t.Fatalf("%s and %s overlap", a, b)
			}
		}
	}
	assert.Equal(t, "/a0", prefixEnd("/a/"))
}
