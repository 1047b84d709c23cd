// Package dnsproxy answers a pod's captured DNS queries as ztunnel's DNS proxy does: an A or AAAA
// query for a service hostname of the workload view, asked as is or with one of the client's
// search domains appended, is answered from the view (the service's addresses on the client's
// network, behind a CNAME from the asked name where a search domain was stripped); anything else
// is left to the cluster's resolver. So a client's lookup of a mesh service ends at its node, as
// with ztunnel, instead of walking its search list through the cluster's DNS.
package dnsproxy

import (
	"strings"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/ambientmc/ambientmc/emulator/dataplane"
)

// TTL is the lifetime ztunnel gives the records it answers with.
const TTL = 30

// Client is who asks: the pod's namespace (its search domains) and network (which addresses of a
// service it can call).
type Client struct {
	Namespace, Network string
	// ClusterDomain is the cluster's DNS domain ("cluster.local").
	ClusterDomain string
}

// searchDomains are the client's resolver search domains, most specific first, as kubelet writes
// them into a pod's resolv.conf and ztunnel strips them.
func (c Client) searchDomains() []string {
	d := strings.TrimSuffix(c.ClusterDomain, ".") + "."
	return []string{c.Namespace + ".svc." + d, "svc." + d, d}
}

// Answer returns the reply to query from c, or ok false when the query is not one to answer from
// view (forward it). A malformed query is not answered either: the resolver says what it says.
func Answer(query []byte, view *dataplane.View, c Client) (reply []byte, ok bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, false
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 || view == nil {
		return nil, false
	}
	q := qs[0]
	if q.Class != dnsmessage.ClassINET || (q.Type != dnsmessage.TypeA && q.Type != dnsmessage.TypeAAAA) {
		return nil, false
	}
	asked := strings.ToLower(q.Name.String())
	svc, canonical := lookup(view, asked, c)
	if svc == nil {
		return nil, false
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	name := q.Name
	if canonical != asked {
		target, err := dnsmessage.NewName(canonical)
		if err != nil {
			return nil, false
		}
		if b.CNAMEResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: TTL}, dnsmessage.CNAMEResource{CNAME: target}) != nil {
			return nil, false
		}
		name = target
	}
	for _, ip := range svc.VIPs[c.Network] {
		rh := dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: TTL}
		switch {
		case q.Type == dnsmessage.TypeA && ip.Is4():
			err = b.AResource(rh, dnsmessage.AResource{A: ip.As4()})
		case q.Type == dnsmessage.TypeAAAA && ip.Is6() && !ip.Is4In6():
			err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: ip.As16()})
		}
		if err != nil {
			return nil, false
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil, false
	}
	return out, true
}

// lookup finds the service asked for (fully qualified, with its trailing dot), as is or with one of
// c's search domains stripped, and the hostname it answers for (with the trailing dot).
func lookup(view *dataplane.View, asked string, c Client) (*dataplane.Service, string) {
	candidates := []string{asked}
	for _, d := range c.searchDomains() {
		if stripped, ok := strings.CutSuffix(asked, "."+d); ok && stripped != "" {
			candidates = append(candidates, stripped+".")
		}
	}
	for _, name := range candidates {
		if svc := view.ServiceByHostname(strings.TrimSuffix(name, ".")); svc != nil {
			return svc, name
		}
	}
	return nil, ""
}
