package rbac

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/emptypb"
	"istio.io/istio/pkg/workloadapi/security"
)

func exact(s string) *security.StringMatch {
	return &security.StringMatch{MatchType: &security.StringMatch_Exact{Exact: s}}
}

func policy(ns, name string, scope security.Scope, action security.Action, groups ...*security.Group) *security.Authorization {
	return &security.Authorization{Namespace: ns, Name: name, Scope: scope, Action: action, Groups: groups}
}

// group is one rule per match list: every list must match (AND), any match within a list (OR).
func group(rules ...[]*security.Match) *security.Group {
	g := &security.Group{}
	for _, ms := range rules {
		g.Rules = append(g.Rules, &security.Rules{Matches: ms})
	}
	return g
}

func conn(id string, dstPort uint16) Conn {
	return Conn{Src: netip.MustParseAddrPort("10.1.0.5:40000"), Dst: netip.AddrPortFrom(netip.MustParseAddr("10.2.0.7"), dstPort), SrcIdentity: id}
}

const (
	allowed = "spiffe://cluster.local/ns/client/sa/allowed"
	other   = "spiffe://cluster.local/ns/client/sa/other"
	foreign = "spiffe://cluster.local/ns/elsewhere/sa/allowed"
)

// The decision as ztunnel's assert_rbac makes it (src/state.rs): a matching DENY refuses, no
// ALLOW policy allows, else an ALLOW must match; policies apply by scope.
func TestCheckDecidesAsZtunnel(t *testing.T) {
	allowOne := policy("echo", "allow-one", security.Scope_NAMESPACE, security.Action_ALLOW,
		group([]*security.Match{{Principals: []*security.StringMatch{exact("cluster.local/ns/client/sa/allowed")}}}))
	denyElsewhere := policy("istio-system", "deny-elsewhere", security.Scope_GLOBAL, security.Action_DENY,
		group([]*security.Match{{Namespaces: []*security.StringMatch{exact("elsewhere")}}}))
	selected := policy("echo", "selected", security.Scope_WORKLOAD_SELECTOR, security.Action_DENY,
		group([]*security.Match{{DestinationPorts: []uint32{9090}}}))
	allowNothing := policy("locked", "allow-nothing", security.Scope_NAMESPACE, security.Action_ALLOW)
	s := NewStore(map[string]*security.Authorization{
		"echo/allow-one": allowOne, "istio-system/deny-elsewhere": denyElsewhere, "echo/selected": selected, "locked/allow-nothing": allowNothing,
	})
	for _, c := range []struct {
		name     string
		ns       string
		named    []string
		conn     Conn
		deniedBy string // "" allowed; "-" denied with no ALLOW matching
	}{
		{"no policy applies: allowed", "open", nil, conn(other, 8080), ""},
		{"the allowed principal", "echo", nil, conn(allowed, 8080), ""},
		{"another principal: no ALLOW matches", "echo", nil, conn(other, 8080), "-"},
		{"no identity matches no principal", "echo", nil, conn("", 8080), "-"},
		{"a global DENY applies in every namespace", "open", nil, conn(foreign, 8080), "istio-system/deny-elsewhere"},
		{"DENY before ALLOW", "echo", nil, conn(foreign, 8080), "istio-system/deny-elsewhere"},
		{"a selector policy only where the workload names it", "echo", nil, conn(allowed, 9090), ""},
		{"named by the workload", "echo", []string{"echo/selected"}, conn(allowed, 9090), "echo/selected"},
		{"a name with no policy behind it is skipped", "echo", []string{"echo/gone"}, conn(allowed, 8080), ""},
		{"an ALLOW without rules allows nothing", "locked", nil, conn(allowed, 8080), "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.Check(c.ns, c.named, c.conn)
			if c.deniedBy == "" {
				assert.NoError(t, err)
				return
			}
			var d *Denied
			if assert.ErrorAs(t, err, &d) {
				assert.Equal(t, map[bool]string{true: "", false: c.deniedBy}[c.deniedBy == "-"], d.Policy)
			}
		})
	}
}

// How one policy matches a connection (src/rbac.rs Authorization::matches).
func TestMatchesAsZtunnel(t *testing.T) {
	cidr := func(s string) *security.Address {
		p := netip.MustParsePrefix(s)
		return &security.Address{Address: p.Addr().AsSlice(), Length: uint32(p.Bits())}
	}
	p := func(rules ...[]*security.Match) *security.Authorization {
		return policy("ns", "p", security.Scope_NAMESPACE, security.Action_ALLOW, group(rules...))
	}
	for _, c := range []struct {
		name string
		p    *security.Authorization
		conn Conn
		want bool
	}{
		{"every rule of a group must match", p(
			[]*security.Match{{Namespaces: []*security.StringMatch{exact("client")}}},
			[]*security.Match{{DestinationPorts: []uint32{9090}}}), conn(allowed, 8080), false},
		{"any match of a rule", p([]*security.Match{
			{DestinationPorts: []uint32{9090}}, {Namespaces: []*security.StringMatch{exact("client")}}}), conn(allowed, 8080), true},
		{"an empty rule matches", p(nil, []*security.Match{{DestinationPorts: []uint32{8080}}}), conn(allowed, 8080), true},
		{"an empty match is skipped, not a match", p([]*security.Match{{}}), conn(allowed, 8080), false},
		{"a negative list excludes", p([]*security.Match{{NotPrincipals: []*security.StringMatch{exact("cluster.local/ns/client/sa/allowed")}}}), conn(allowed, 8080), false},
		{"a negative list alone matches the rest", p([]*security.Match{{NotPrincipals: []*security.StringMatch{exact("cluster.local/ns/client/sa/allowed")}}}), conn(other, 8080), true},
		{"prefix", p([]*security.Match{{Principals: []*security.StringMatch{{MatchType: &security.StringMatch_Prefix{Prefix: "cluster.local/ns/client/"}}}}}), conn(other, 8080), true},
		{"suffix", p([]*security.Match{{Principals: []*security.StringMatch{{MatchType: &security.StringMatch_Suffix{Suffix: "/sa/allowed"}}}}}), conn(foreign, 8080), true},
		{"presence needs an identity", p([]*security.Match{{Principals: []*security.StringMatch{{MatchType: &security.StringMatch_Presence{Presence: &emptypb.Empty{}}}}}}), conn("", 8080), false},
		{"a service account", p([]*security.Match{{ServiceAccounts: []*security.ServiceAccountMatch{{Namespace: "client", ServiceAccount: "allowed"}}}}), conn(allowed, 8080), true},
		{"a service account of another namespace", p([]*security.Match{{ServiceAccounts: []*security.ServiceAccountMatch{{Namespace: "client", ServiceAccount: "allowed"}}}}), conn(foreign, 8080), false},
		{"a source CIDR", p([]*security.Match{{SourceIps: []*security.Address{cidr("10.1.0.0/16")}}}), conn(other, 8080), true},
		{"outside the source CIDR", p([]*security.Match{{SourceIps: []*security.Address{cidr("10.9.0.0/16")}}}), conn(other, 8080), false},
		{"a destination address", p([]*security.Match{{NotDestinationIps: []*security.Address{cidr("10.2.0.7/32")}}}), conn(other, 8080), false},
		{"a policy without groups matches nothing", policy("ns", "p", security.Scope_NAMESPACE, security.Action_DENY), conn(other, 8080), false},
	} {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, Matches(c.p, c.conn)) })
	}
}
