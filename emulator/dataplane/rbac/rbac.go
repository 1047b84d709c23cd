// Package rbac is ztunnel's L4 authorization over the Authorization resources istiod sends: which
// policies apply to a destination workload (its namespace's, the mesh-wide ones of the root
// namespace, and those naming the workload), DENY before ALLOW, and how a policy matches a
// connection. It follows istio/ztunnel at 00c8b17: src/rbac.rs (Authorization::matches,
// StringMatch, ServiceAccountMatch), src/state/policy.rs (PolicyStore: by scope) and src/state.rs
// (assert_rbac). The emulated data plane enforces it on every inbound tunnel.
package rbac

import (
	"fmt"
	"net/netip"
	"strings"

	"istio.io/istio/pkg/spiffe"
	"istio.io/istio/pkg/workloadapi/security"
)

// Conn is a connection as authorization sees it: its addresses and the verified SPIFFE ID of its
// source ("" when it has none: plaintext).
type Conn struct {
	Src, Dst    netip.AddrPort
	SrcIdentity string
}

// Store holds the policies by resource name, and the names that apply by namespace: a
// Namespace-scoped policy to its namespace, a Global one (root namespace) to every namespace
// (under ""). A WorkloadSelector policy applies only where a workload names it.
type Store struct {
	byName      map[string]*security.Authorization
	byNamespace map[string][]string
}

// NewStore indexes policies (by xDS resource name) as ztunnel's PolicyStore does.
func NewStore(policies map[string]*security.Authorization) *Store {
	s := &Store{byName: map[string]*security.Authorization{}, byNamespace: map[string][]string{}}
	for name, p := range policies {
		s.byName[name] = p
		switch p.GetScope() {
		case security.Scope_GLOBAL:
			s.byNamespace[""] = append(s.byNamespace[""], name)
		case security.Scope_NAMESPACE:
			s.byNamespace[p.GetNamespace()] = append(s.byNamespace[p.GetNamespace()], name)
		}
	}
	return s
}

// Denied says why a connection was refused: a DENY policy matched (Policy names it), or ALLOW
// policies apply and none matched.
type Denied struct {
	Policy string
	Conn   Conn
}

func (d *Denied) Error() string {
	src := d.Conn.SrcIdentity
	if src == "" {
		src = "no identity"
	}
	if d.Policy != "" {
		return fmt.Sprintf("rbac: %s (%s) to %s denied by policy %s", d.Conn.Src, src, d.Conn.Dst, d.Policy)
	}
	return fmt.Sprintf("rbac: %s (%s) to %s allowed by no policy", d.Conn.Src, src, d.Conn.Dst)
}

// Check decides c to a workload in namespace ns that names workloadPolicies (its
// authorization_policies): nil to allow, a *Denied to refuse. A name with no policy behind it is
// skipped, as ztunnel does in the moment between a workload's update and its policy's.
func (s *Store) Check(ns string, workloadPolicies []string, c Conn) error {
	if len(s.byName) == 0 {
		return nil // every inbound tunnel asks: with no policy held, allocate nothing
	}
	var names []string
	names = append(names, s.byNamespace[ns]...)
	names = append(names, s.byNamespace[""]...)
	names = append(names, workloadPolicies...)
	var allow []*security.Authorization
	for _, name := range names {
		p := s.byName[name]
		if p == nil {
			continue
		}
		if p.GetAction() == security.Action_DENY {
			if Matches(p, c) {
				return &Denied{Policy: name, Conn: c}
			}
			continue
		}
		allow = append(allow, p)
	}
	if len(allow) == 0 {
		return nil
	}
	for _, p := range allow {
		if Matches(p, c) {
			return nil
		}
	}
	return &Denied{Conn: c}
}

// Matches says whether any of p's groups matches c: every rule of the group (an empty rule
// matches), each rule by any of its non-empty matches. A policy without groups matches nothing.
func Matches(p *security.Authorization, c Conn) bool {
	ns := ""
	if id, err := spiffe.ParseIdentity(c.SrcIdentity); err == nil {
		ns = id.Namespace
	}
	for _, g := range p.GetGroups() {
		all := true
		for _, r := range g.GetRules() {
			any := len(r.GetMatches()) == 0
			for _, m := range r.GetMatches() {
				if !isEmpty(m) && matchOne(m, c, ns) {
					any = true
					break
				}
			}
			if !any {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func matchOne(m *security.Match, c Conn, ns string) bool {
	return both(m.GetDestinationIps(), m.GetNotDestinationIps(), func(a *security.Address) bool { return contains(a, c.Dst.Addr()) }) &&
		both(m.GetSourceIps(), m.GetNotSourceIps(), func(a *security.Address) bool { return contains(a, c.Src.Addr()) }) &&
		both(m.GetDestinationPorts(), m.GetNotDestinationPorts(), func(p uint32) bool { return p == uint32(c.Dst.Port()) }) &&
		both(m.GetServiceAccounts(), m.GetNotServiceAccounts(), func(sa *security.ServiceAccountMatch) bool { return serviceAccount(sa, c.SrcIdentity) }) &&
		both(m.GetPrincipals(), m.GetNotPrincipals(), func(s *security.StringMatch) bool { return principal(s, c.SrcIdentity) }) &&
		both(m.GetNamespaces(), m.GetNotNamespaces(), func(s *security.StringMatch) bool { return str(s, ns) })
}

// both is ztunnel's matches_internal: any of the positive list (none: true), and none of the
// negative list.
func both[T any](pos, neg []T, pred func(T) bool) bool {
	ok := len(pos) == 0
	for _, v := range pos {
		if pred(v) {
			ok = true
			break
		}
	}
	for _, v := range neg {
		if pred(v) {
			return false
		}
	}
	return ok
}

func isEmpty(m *security.Match) bool {
	return len(m.GetNamespaces())+len(m.GetNotNamespaces())+len(m.GetServiceAccounts())+len(m.GetNotServiceAccounts())+
		len(m.GetPrincipals())+len(m.GetNotPrincipals())+len(m.GetSourceIps())+len(m.GetNotSourceIps())+
		len(m.GetDestinationIps())+len(m.GetNotDestinationIps())+len(m.GetDestinationPorts())+len(m.GetNotDestinationPorts()) == 0
}

// principal matches a principal against "td/ns/x/sa/y": the identity without its spiffe://
// (an identity without it, or none, matches nothing).
func principal(s *security.StringMatch, id string) bool {
	rest, ok := strings.CutPrefix(id, "spiffe://")
	return ok && str(s, rest)
}

func str(s *security.StringMatch, v string) bool {
	switch m := s.GetMatchType().(type) {
	case *security.StringMatch_Exact:
		return v == m.Exact
	case *security.StringMatch_Prefix:
		return strings.HasPrefix(v, m.Prefix)
	case *security.StringMatch_Suffix:
		return strings.HasSuffix(v, m.Suffix)
	case *security.StringMatch_Presence:
		return v != ""
	}
	// ztunnel drops a match without a type when it converts the resource: it never matches.
	return false
}

func serviceAccount(sa *security.ServiceAccountMatch, id string) bool {
	p, err := spiffe.ParseIdentity(id)
	return err == nil && p.Namespace == sa.GetNamespace() && p.ServiceAccount == sa.GetServiceAccount()
}

// contains says whether the CIDR a holds ip (an unparseable address matches nothing, as ztunnel
// drops it when it converts the resource).
func contains(a *security.Address, ip netip.Addr) bool {
	addr, ok := netip.AddrFromSlice(a.GetAddress())
	if !ok {
		return false
	}
	p, err := addr.Prefix(int(a.GetLength()))
	return err == nil && p.Contains(ip.Unmap())
}
