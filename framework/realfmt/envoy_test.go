package realfmt

import (
	"testing"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Envoy's own examples: TagSpecifier_Regex's first example (go-control-plane
// envoy/config/metrics/v3/stats.pb.go) and PrometheusStatsFormatterTest.MetricName
// (envoyproxy/envoy test/server/admin/prometheus_stats_test.cc: "vulture.eats-liver" is
// "envoy_vulture_eats_liver").
func TestEnvoysExamples(t *testing.T) {
	s := EnvoyStats{Config: &metricsv3.StatsConfig{
		UseAllDefaultTags: wrapperspb.Bool(false),
		StatsTags: []*metricsv3.TagSpecifier{{TagName: "envoy.cluster_name",
			TagValue: &metricsv3.TagSpecifier_Regex{Regex: `^cluster\.((.+?)\.)`}}},
	}}
	name, tags, err := s.Extract("cluster.foo_cluster.upstream_rq_timeout")
	require.NoError(t, err)
	assert.Equal(t, "cluster.upstream_rq_timeout", name)
	assert.Equal(t, []Tag{{Name: "envoy.cluster_name", Value: "foo_cluster"}}, tags)
	assert.Equal(t, "envoy_vulture_eats_liver", PrometheusName("vulture.eats-liver"))
}

func TestStatsMatcher(t *testing.T) {
	include := func(p ...*matcherv3.StringMatcher) EnvoyStats {
		return EnvoyStats{Config: &metricsv3.StatsConfig{StatsMatcher: &metricsv3.StatsMatcher{
			StatsMatcher: &metricsv3.StatsMatcher_InclusionList{InclusionList: &matcherv3.ListStringMatcher{Patterns: p}}}}}
	}
	prefix := func(s string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: s}}
	}
	regex := func(s string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: s}}}
	}
	s := include(prefix("server"), regex(`vhost\..*\.route\..*`))
	for name, want := range map[string]bool{
		"server.live":                     true,
		"vhost.a.route.b.upstream_rq_200": true,
		"x.vhost.a.route.b":               false, // a safe_regex matches the whole name
		ConnectTerminateRequests:          false,
	} {
		got, err := s.Instantiated(name)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	all, err := EnvoyStats{Config: &metricsv3.StatsConfig{}}.Instantiated(ConnectTerminateRequests)
	require.NoError(t, err)
	assert.True(t, all, "no matcher: every stat")
}

// Tags come off the original name; the removals happen after all of them; a regex RE2 cannot
// compile is skipped only where its literal start rules it out.
func TestExtract(t *testing.T) {
	s := EnvoyStats{Config: &metricsv3.StatsConfig{
		UseAllDefaultTags: wrapperspb.Bool(false),
		StatsTags: []*metricsv3.TagSpecifier{
			{TagName: "http_conn_manager_listener_prefix", TagValue: &metricsv3.TagSpecifier_Regex{Regex: `^listener(?=\.).*?\.http\.(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)`}},
			{TagName: "response_code_class", TagValue: &metricsv3.TagSpecifier_Regex{Regex: `_rq(_(\dxx))$`}},
			{TagName: "http_conn_manager_prefix", TagValue: &metricsv3.TagSpecifier_Regex{Regex: `^http\.(((?:[_.[:digit:]\w]*|[_\[\]aAbBcCdDeEfF[:digit:]\w\:]*));\.)`}},
		},
	}}
	name, tags, err := s.Extract("http.inbound_0.0.0.0_8080;.downstream_rq_2xx")
	require.NoError(t, err)
	assert.Equal(t, "http.downstream_rq", name)
	assert.Equal(t, []Tag{{"response_code_class", "2xx"}, {"http_conn_manager_prefix", "inbound_0.0.0.0_8080"}}, tags)

	name, tags, err = s.Extract(ConnectTerminateRequests)
	require.NoError(t, err)
	assert.Equal(t, ConnectTerminateRequests, name, "no \";\" after the prefix: no tag")
	assert.Empty(t, tags)

	_, _, err = s.Extract("listener.0.0.0.0_15008.http.10.0.0.1_80.downstream_rq_total")
	assert.ErrorContains(t, err, "may apply to")

	_, _, err = EnvoyStats{Config: &metricsv3.StatsConfig{}}.Extract(ConnectTerminateRequests)
	assert.ErrorContains(t, err, "default tags")
}

func TestPrometheusCounters(t *testing.T) {
	s := EnvoyStats{Config: &metricsv3.StatsConfig{
		UseAllDefaultTags: wrapperspb.Bool(false),
		StatsTags: []*metricsv3.TagSpecifier{
			{TagName: "response_code_class", TagValue: &metricsv3.TagSpecifier_Regex{Regex: `_rq(_(\dxx))$`}},
		},
		StatsMatcher: &metricsv3.StatsMatcher{StatsMatcher: &metricsv3.StatsMatcher_InclusionList{InclusionList: &matcherv3.ListStringMatcher{
			Patterns: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "http.connect_terminate"}}}}}},
	}}
	text, err := s.PrometheusCounters(map[string]uint64{
		ConnectTerminateRequests:                   25,
		"http.connect_terminate.downstream_rq_2xx": 24,
		"http.admin.downstream_rq_total":           4,
	})
	require.NoError(t, err)
	assert.Equal(t, "# TYPE envoy_http_connect_terminate_downstream_rq counter\n"+
		"envoy_http_connect_terminate_downstream_rq{response_code_class=\"2xx\"} 24\n"+
		"# TYPE envoy_http_connect_terminate_downstream_rq_total counter\n"+
		"envoy_http_connect_terminate_downstream_rq_total{} 25\n", text)
}
