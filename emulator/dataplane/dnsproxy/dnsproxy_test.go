package dnsproxy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/emulator/dataplane"
)

func view() *dataplane.View {
	return dataplane.BuildView(map[string]*workloadapi.Address{"echo": {Type: &workloadapi.Address_Service{Service: &workloadapi.Service{
		Name: "echo", Namespace: "probe", Hostname: "echo.probe.svc.cluster.local",
		Addresses: []*workloadapi.NetworkAddress{{Network: "network-1", Address: []byte{10, 96, 0, 10}}},
		Ports:     []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}},
	}}}})
}

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	require.NoError(t, b.StartQuestions())
	require.NoError(t, b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}))
	out, err := b.Finish()
	require.NoError(t, err)
	return out
}

// answer is what a reply says: its header, CNAME targets and addresses, in order.
type answer struct {
	h     dnsmessage.Header
	cname []string
	names []string // the owner name of each address record
	addrs []netip.Addr
}

func parse(t *testing.T, reply []byte) answer {
	t.Helper()
	var p dnsmessage.Parser
	h, err := p.Start(reply)
	require.NoError(t, err)
	require.NoError(t, p.SkipAllQuestions())
	a := answer{h: h}
	rs, err := p.AllAnswers()
	require.NoError(t, err)
	for _, r := range rs {
		assert.Equal(t, uint32(TTL), r.Header.TTL)
		switch b := r.Body.(type) {
		case *dnsmessage.CNAMEResource:
			a.cname = append(a.cname, b.CNAME.String())
		case *dnsmessage.AResource:
			a.names, a.addrs = append(a.names, r.Header.Name.String()), append(a.addrs, netip.AddrFrom4(b.A))
		case *dnsmessage.AAAAResource:
			a.names, a.addrs = append(a.names, r.Header.Name.String()), append(a.addrs, netip.AddrFrom16(b.AAAA))
		}
	}
	return a
}

var fromProbe = Client{Namespace: "probe", Network: "network-1", ClusterDomain: "cluster.local"}

// A service's hostname is answered from the view, asked as is (any case) or with one of the
// client's search domains appended (then behind a CNAME to the hostname, as ztunnel does).
func TestAnswersAServiceHostnameFromTheView(t *testing.T) {
	vip := netip.MustParseAddr("10.96.0.10")
	for _, tc := range []struct{ asked, cname string }{
		{"echo.probe.svc.cluster.local.", ""},
		{"ECHO.probe.svc.cluster.local.", ""},
		{"echo.probe.svc.cluster.local.probe.svc.cluster.local.", "echo.probe.svc.cluster.local."},
		{"echo.probe.svc.cluster.local.svc.cluster.local.", "echo.probe.svc.cluster.local."},
		{"echo.probe.svc.cluster.local.cluster.local.", "echo.probe.svc.cluster.local."},
	} {
		reply, ok := Answer(query(t, tc.asked, dnsmessage.TypeA), view(), fromProbe)
		require.True(t, ok, tc.asked)
		a := parse(t, reply)
		assert.Equal(t, uint16(4242), a.h.ID, tc.asked)
		assert.True(t, a.h.Response && a.h.Authoritative && a.h.RecursionDesired, tc.asked)
		assert.Equal(t, dnsmessage.RCodeSuccess, a.h.RCode, tc.asked)
		assert.Equal(t, []netip.Addr{vip}, a.addrs, tc.asked)
		if tc.cname == "" {
			assert.Empty(t, a.cname, tc.asked)
			assert.Equal(t, []string{tc.asked}, a.names)
		} else {
			assert.Equal(t, []string{tc.cname}, a.cname, tc.asked)
			assert.Equal(t, []string{tc.cname}, a.names, "the address record is the hostname's")
		}
	}
}

// A known host with no address of the asked family, or none on the client's network, is an empty
// answer, not NXDOMAIN: the host exists.
func TestAnswersEmptyForAFamilyOrNetworkWithoutAddresses(t *testing.T) {
	for _, tc := range []struct {
		typ    dnsmessage.Type
		client Client
	}{
		{dnsmessage.TypeAAAA, fromProbe},
		{dnsmessage.TypeA, Client{Namespace: "probe", Network: "network-2", ClusterDomain: "cluster.local"}},
	} {
		reply, ok := Answer(query(t, "echo.probe.svc.cluster.local.", tc.typ), view(), tc.client)
		require.True(t, ok)
		a := parse(t, reply)
		assert.Equal(t, dnsmessage.RCodeSuccess, a.h.RCode)
		assert.True(t, a.h.Authoritative)
		assert.Empty(t, a.addrs)
	}
}

// What the view does not know, other record types, a search domain that is not the client's and
// malformed queries are left to the cluster's resolver.
func TestLeavesTheRestToTheResolver(t *testing.T) {
	for name, q := range map[string][]byte{
		"unknown host":           query(t, "nope.probe.svc.cluster.local.", dnsmessage.TypeA),
		"another record type":    query(t, "echo.probe.svc.cluster.local.", dnsmessage.TypeMX),
		"another namespace's":    query(t, "echo.probe.svc.cluster.local.other.svc.cluster.local.", dnsmessage.TypeA),
		"outside the cluster":    query(t, "example.com.", dnsmessage.TypeA),
		"not a DNS message":      []byte("hello"),
		"an answer, not a query": mustReply(t),
	} {
		_, ok := Answer(q, view(), fromProbe)
		assert.False(t, ok, name)
	}
	_, ok := Answer(query(t, "echo.probe.svc.cluster.local.", dnsmessage.TypeA), nil, fromProbe)
	assert.False(t, ok, "no view yet")
}

func mustReply(t *testing.T) []byte {
	reply, ok := Answer(query(t, "echo.probe.svc.cluster.local.", dnsmessage.TypeA), view(), fromProbe)
	require.True(t, ok)
	return reply
}
