package kindnode

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// What Check reads from a real node (iptables -S, the guard's stamp, kubelet's start).
func TestGuardInPlace(t *testing.T) {
	rules := "-N AMBIENTMC-EGRESS\n-A AMBIENTMC-EGRESS -d 127.0.0.8/29 -j REJECT --reject-with icmp-port-unreachable\n-A AMBIENTMC-EGRESS -d 127.0.0.0/8 -j RETURN\n-A AMBIENTMC-EGRESS -j REJECT --reject-with icmp-net-unreachable\n"
	require.NoError(t, guardInPlace(rules+"---\n1764835200.123\nExecMainStartTimestamp=@1764835210\n"))
	require.ErrorContains(t, guardInPlace(rules+"---\n1764835220.5\nExecMainStartTimestamp=@1764835210\n"), "after kubelet started")
	open := "-N AMBIENTMC-EGRESS\n-A AMBIENTMC-EGRESS -d 127.0.0.0/8 -j RETURN\n"
	require.ErrorContains(t, guardInPlace(open+"---\n1\nExecMainStartTimestamp=@2\n"), "does not end in a REJECT")
}

func TestSummarizeGuard(t *testing.T) {
	out := `Chain AMBIENTMC-EGRESS (2 references)
    pkts      bytes target     prot opt in     out     source               destination
     120     7200 REJECT     0    --  *      *       0.0.0.0/0            127.0.0.8/29         reject-with icmp-port-unreachable
   22979  7293978 RETURN     0    --  *      *       0.0.0.0/0            127.0.0.0/8
       2       80 REJECT     0    --  *      *       0.0.0.0/0            0.0.0.0/0            reject-with icmp-net-unreachable
Chain INPUT (policy ACCEPT 0 packets, 0 bytes)
    pkts      bytes target     prot opt in     out     source               destination
       8      480 REJECT     0    --  *      *       0.0.0.0/0            127.0.0.8/29         reject-with icmp-port-unreachable
`
	require.Equal(t, "egress guard rejected 128 packets to Docker's DNS and 2 to other addresses beyond this host", SummarizeGuard(out))
}
