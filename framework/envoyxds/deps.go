package envoyxds

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tls "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// What Envoy asks for after a cluster or a listener arrives: the resources they name with ADS as
// their config source. Names another source serves (the agent's SDS socket for the workload's
// own certificate, "sds-grpc") are not asked of istiod, as Envoy does not ask them of it.

// endpointNames are the EDS resources c needs: its own, for an EDS cluster fed over ADS.
func endpointNames(c *cluster.Cluster) []string {
	if c.GetType() != cluster.Cluster_EDS || !overADS(c.GetEdsClusterConfig().GetEdsConfig()) {
		return nil
	}
	if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
		return []string{n}
	}
	return []string{c.GetName()}
}

// clusterSecrets are the SDS resources over ADS c's transport sockets name.
func clusterSecrets(c *cluster.Cluster) []string {
	sockets := []*core.TransportSocket{c.GetTransportSocket()}
	for _, m := range c.GetTransportSocketMatches() {
		sockets = append(sockets, m.GetTransportSocket())
	}
	var names []string
	for _, s := range sockets {
		ctx := &tls.UpstreamTlsContext{}
		if unmarshal(s.GetTypedConfig(), ctx) {
			names = append(names, tlsSecrets(ctx.GetCommonTlsContext())...)
		}
	}
	return names
}

// listenerDeps are the RDS and SDS resources over ADS l's filter chains name.
func listenerDeps(l *listener.Listener) (routes, secrets []string) {
	chains := append([]*listener.FilterChain{l.GetDefaultFilterChain()}, l.GetFilterChains()...)
	for _, fc := range chains {
		ctx := &tls.DownstreamTlsContext{}
		if unmarshal(fc.GetTransportSocket().GetTypedConfig(), ctx) {
			secrets = append(secrets, tlsSecrets(ctx.GetCommonTlsContext())...)
		}
		for _, f := range fc.GetFilters() {
			m := &hcm.HttpConnectionManager{}
			if unmarshal(f.GetTypedConfig(), m) && overADS(m.GetRds().GetConfigSource()) {
				routes = append(routes, m.GetRds().GetRouteConfigName())
			}
		}
	}
	return routes, secrets
}

// tlsSecrets are the certificate and validation secrets over ADS of one TLS context.
func tlsSecrets(c *tls.CommonTlsContext) []string {
	configs := append([]*tls.SdsSecretConfig{c.GetValidationContextSdsSecretConfig(),
		c.GetCombinedValidationContext().GetValidationContextSdsSecretConfig()}, c.GetTlsCertificateSdsSecretConfigs()...)
	var names []string
	for _, s := range configs {
		if s != nil && overADS(s.GetSdsConfig()) {
			names = append(names, s.GetName())
		}
	}
	return names
}

func overADS(s *core.ConfigSource) bool { return s.GetAds() != nil }

// unmarshal decodes a into m when a holds m's type.
func unmarshal(a *anypb.Any, m proto.Message) bool {
	return a != nil && a.MessageIs(m) && a.UnmarshalTo(m) == nil
}
