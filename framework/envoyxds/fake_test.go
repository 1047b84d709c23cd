package envoyxds

import (
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// fakeIstiod is an in-process delta ADS server on 127.0.0.1 over mTLS, serving istiod's way: a
// wildcard subscription gets every resource of its type, a named one the resources it names. Its
// serving certificate is the cluster intermediate, which carries istiod's DNS name as the
// plugged-in CA does.
type fakeIstiod struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	addr      string
	server    *grpc.Server
	resources map[string][]named // by type URL

	mu       sync.Mutex
	node     *core.Node
	peerID   string
	requests []*discovery.DeltaDiscoveryRequest
	sent     []*discovery.DeltaDiscoveryResponse
	push     chan *discovery.DeltaDiscoveryResponse
	nonceSeq int
}

type named struct {
	name string
	m    proto.Message
}

func startFakeIstiod(t *testing.T, addr string, inter *pki.Intermediate, roots *pki.Root, resources map[string][]named) *fakeIstiod {
	t.Helper()
	cert, err := tls.X509KeyPair(inter.ChainPEM, inter.KeyPEM)
	require.NoError(t, err)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert,
		VerifyPeerCertificate: pki.VerifySPIFFE(roots.Pool())}
	var l net.Listener
	require.Eventually(t, func() bool { l, err = net.Listen("tcp", addr); return err == nil }, 5*time.Second, 50*time.Millisecond, "listen on %s", addr)
	f := &fakeIstiod{addr: l.Addr().String(), resources: resources, push: make(chan *discovery.DeltaDiscoveryResponse, 16)}
	f.server = grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	discovery.RegisterAggregatedDiscoveryServiceServer(f.server, f)
	go func() { _ = f.server.Serve(l) }()
	t.Cleanup(f.server.Stop)
	return f
}

func (f *fakeIstiod) response(typeURL string, add []named, remove ...string) *discovery.DeltaDiscoveryResponse {
	f.mu.Lock()
	f.nonceSeq++
	nonce := strconv.Itoa(f.nonceSeq)
	f.mu.Unlock()
	r := &discovery.DeltaDiscoveryResponse{TypeUrl: typeURL, Nonce: nonce, SystemVersionInfo: nonce, RemovedResources: remove}
	for _, a := range add {
		any, err := anypb.New(a.m)
		if err != nil {
			panic(err)
		}
		r.Resources = append(r.Resources, &discovery.Resource{Name: a.name, Version: nonce, Resource: any})
	}
	return r
}

func (f *fakeIstiod) DeltaAggregatedResources(s discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	if p, ok := peer.FromContext(s.Context()); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			if id, err := pki.PeerID(ti.State); err == nil {
				f.mu.Lock()
				f.peerID = id
				f.mu.Unlock()
			}
		}
	}
	reqs := make(chan *discovery.DeltaDiscoveryRequest)
	errc := make(chan error, 1)
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				errc <- err
				return
			}
			reqs <- r
		}
	}()
	seen := map[string]bool{}
	for {
		select {
		case err := <-errc:
			return err
		case r := <-reqs:
			f.mu.Lock()
			if f.node == nil && r.GetNode().GetMetadata() != nil {
				f.node = r.GetNode()
			}
			f.requests = append(f.requests, r)
			f.mu.Unlock()
			var add []named
			switch {
			case !seen[r.GetTypeUrl()] && len(r.GetResourceNamesSubscribe()) == 0:
				add = f.resources[r.GetTypeUrl()] // a wildcard's first request
			case len(r.GetResourceNamesSubscribe()) > 0:
				for _, n := range f.resources[r.GetTypeUrl()] {
					if slices.Contains(r.GetResourceNamesSubscribe(), n.name) {
						add = append(add, n)
					}
				}
			default:
				continue // an ACK
			}
			seen[r.GetTypeUrl()] = true
			if err := f.send(s, f.response(r.GetTypeUrl(), add)); err != nil {
				return err
			}
		case resp := <-f.push:
			if err := f.send(s, resp); err != nil {
				return err
			}
		}
	}
}

func (f *fakeIstiod) send(s discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer, r *discovery.DeltaDiscoveryResponse) error {
	f.mu.Lock()
	f.sent = append(f.sent, r)
	f.mu.Unlock()
	return s.Send(r)
}

// acked says whether the client acknowledged nonce, without an error.
func (f *fakeIstiod) acked(nonce string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.requests {
		if r.GetResponseNonce() == nonce && r.GetErrorDetail() == nil {
			return true
		}
	}
	return false
}

// subscribed are the names the client asked for by name, of typeURL.
func (f *fakeIstiod) subscribed(typeURL string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, r := range f.requests {
		if r.GetTypeUrl() == typeURL {
			names = append(names, r.GetResourceNamesSubscribe()...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func ads() *core.ConfigSource {
	return &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}, ResourceApiVersion: core.ApiVersion_V3}
}

// agentSDS is how istiod points Envoy at the agent's SDS socket for the workload's certificate.
func agentSDS() *core.ConfigSource {
	return &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_ApiConfigSource{ApiConfigSource: &core.ApiConfigSource{
		ApiType: core.ApiConfigSource_GRPC, GrpcServices: []*core.GrpcService{{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: "sds-grpc"}}}},
	}}}
}

func edsCluster(name string, source *core.ConfigSource) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: name, EdsConfig: source}}
}

// tlsCluster is a static cluster whose upstream TLS names a certificate over ADS (a
// credentialName) and the workload's own from the agent.
func tlsCluster(name, credential string) *clusterv3.Cluster {
	ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{
		{Name: credential, SdsConfig: ads()}, {Name: "default", SdsConfig: agentSDS()},
	}}}
	any, err := anypb.New(ctx)
	if err != nil {
		panic(err)
	}
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		TransportSocket: &core.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: any}}}
}

func httpListener(name, route string) *listenerv3.Listener {
	m, err := anypb.New(&hcm.HttpConnectionManager{StatPrefix: name, RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{RouteConfigName: route, ConfigSource: ads()}}})
	if err != nil {
		panic(err)
	}
	return &listenerv3.Listener{Name: name, FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{
		{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: m}},
	}}}}
}

// meshResources are what the fake serves: two EDS clusters over ADS and one whose endpoints come
// from elsewhere, a TLS cluster, an HTTP listener with routes over ADS, workloads, and the
// endpoints, route and secret they name.
func meshResources() map[string][]named {
	return map[string][]named{
		v3.ClusterType: {
			{"inbound-vip|80|http|a.ns.svc.cluster.local", edsCluster("inbound-vip|80|http|a.ns.svc.cluster.local", ads())},
			{"inbound-vip|80|http|b.ns.svc.cluster.local", edsCluster("inbound-vip|80|http|b.ns.svc.cluster.local", ads())},
			{"elsewhere", edsCluster("elsewhere", agentSDS())},
			{"upstream-tls", tlsCluster("upstream-tls", "kubernetes://cred")},
		},
		v3.ListenerType: {{"main_internal", httpListener("main_internal", "http-routes")}},
		v3.EndpointType: {
			{"inbound-vip|80|http|a.ns.svc.cluster.local", &endpointv3.ClusterLoadAssignment{ClusterName: "inbound-vip|80|http|a.ns.svc.cluster.local"}},
			{"inbound-vip|80|http|b.ns.svc.cluster.local", &endpointv3.ClusterLoadAssignment{ClusterName: "inbound-vip|80|http|b.ns.svc.cluster.local"}},
		},
		v3.RouteType:  {{"http-routes", &routev3.RouteConfiguration{Name: "http-routes"}}},
		v3.SecretType: {{"kubernetes://cred", &tlsv3.Secret{Name: "kubernetes://cred"}}},
		v3.WorkloadType: {
			{"cluster-1//Pod/ns/a-0", &workloadapi.Workload{Uid: "cluster-1//Pod/ns/a-0", Name: "a-0"}},
			{"cluster-1//Pod/ns/b-0", &workloadapi.Workload{Uid: "cluster-1//Pod/ns/b-0", Name: "b-0"}},
		},
	}
}
