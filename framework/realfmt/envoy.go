package realfmt

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// The east-west gateway's tunnel counter. istiod gives the gateway's HBONE listener (15008) an
// HTTP connection manager with stat prefix "connect_terminate" (istio.io/istio
// pilot/pkg/networking/core/waypoint.go:27 ConnectTerminate, set as StatPrefix at
// pilot/pkg/networking/core/listener_waypoint.go:226; not delimited with ";", unlike the prefixes
// built with util.DelimitedStatsPrefix). Every connection manager's stats are rooted at
// http.<stat_prefix>. and downstream_rq_total counts its requests (envoyproxy/envoy
// docs/root/configuration/http/http_conn_man/stats.rst): one per CONNECT, that is per tunnel.
const (
	ConnectTerminateStatPrefix = "connect_terminate"
	ConnectTerminateRequests   = "http." + ConnectTerminateStatPrefix + ".downstream_rq_total"
)

// The gateway's Envoy serves /stats/prometheus on the bootstrap's prometheus listener, port
// ENVOY_PROMETHEUS_PORT, 15090 by default (istio.io/istio tools/packaging/common/
// envoy_bootstrap.json:595-651).
const (
	EnvoyPrometheusPort = 15090
	EnvoyPrometheusPath = "/stats/prometheus"
)

// EnvoyStatsInclusionAnnotation is the pod annotation pilot-agent adds to the bootstrap's stats
// inclusion prefixes (istio.io/istio pkg/bootstrap/config.go:251 and :317-318, the required
// prefixes of :64 appended at :265-266). A gateway's pod carries its Gateway's
// spec.infrastructure.annotations, or else the Gateway's own annotations
// (pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go:435-443, 499-501; the pod
// template's annotations at manifests/charts/istio-control/istio-discovery/files/
// waypoint.yaml:49-52).
const EnvoyStatsInclusionAnnotation = "sidecar.istio.io/statsInclusionPrefixes"

// EnvoyStats is an Envoy's stats_config applied to stat names as Envoy applies it, for the parts
// the framework's readers meet: which stats exist at all (stats_matcher), what tags come off a
// name (stats_tags, without Envoy's default tags) and the name /stats/prometheus writes.
type EnvoyStats struct {
	Config *metricsv3.StatsConfig
}

// StatsConfigOfBootstrap is the stats_config of an Envoy bootstrap in JSON (as pilot-agent
// renders Istio's tools/packaging/common/envoy_bootstrap.json), read with go-control-plane's
// type.
func StatsConfigOfBootstrap(bootstrapJSON []byte) (*metricsv3.StatsConfig, error) {
	var b struct {
		StatsConfig json.RawMessage `json:"stats_config"`
	}
	if err := json.Unmarshal(bootstrapJSON, &b); err != nil {
		return nil, fmt.Errorf("realfmt: bootstrap: %w", err)
	}
	if len(b.StatsConfig) == 0 {
		return nil, fmt.Errorf("realfmt: bootstrap has no stats_config")
	}
	cfg := &metricsv3.StatsConfig{}
	if err := protojson.Unmarshal(b.StatsConfig, cfg); err != nil {
		return nil, fmt.Errorf("realfmt: bootstrap's stats_config: %w", err)
	}
	return cfg, nil
}

// Instantiated says whether Envoy creates stat name at all. StatsMatcher (go-control-plane
// envoy/config/metrics/v3/stats.pb.go): "Inclusive match. No stats are enabled except for those
// matching one of the supplied StringMatcher protos"; the exclusion list the other way round;
// none, every stat.
func (s EnvoyStats) Instantiated(name string) (bool, error) {
	m := s.Config.GetStatsMatcher()
	switch {
	case m == nil:
		return true, nil
	case m.GetRejectAll():
		return false, nil
	case m.GetInclusionList() != nil:
		return anyMatch(m.GetInclusionList().GetPatterns(), name)
	case m.GetExclusionList() != nil:
		hit, err := anyMatch(m.GetExclusionList().GetPatterns(), name)
		return !hit, err
	}
	return true, nil
}

func anyMatch(patterns []*matcherv3.StringMatcher, name string) (bool, error) {
	for _, p := range patterns {
		hit, err := stringMatch(p, name)
		if err != nil || hit {
			return hit, err
		}
	}
	return false, nil
}

// stringMatch is envoy.type.matcher.v3.StringMatcher (go-control-plane
// envoy/type/matcher/v3/string.pb.go); a safe_regex must match the whole input (Envoy's RE2
// FullMatch), as RE2 anchored both ends does here.
func stringMatch(p *matcherv3.StringMatcher, s string) (bool, error) {
	fold := func(x string) string {
		if p.GetIgnoreCase() {
			return strings.ToLower(x)
		}
		return x
	}
	switch p.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return fold(s) == fold(p.GetExact()), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(fold(s), fold(p.GetPrefix())), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(fold(s), fold(p.GetSuffix())), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(fold(s), fold(p.GetContains())), nil
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := regexp.Compile(`^(?:` + p.GetSafeRegex().GetRegex() + `)$`)
		if err != nil {
			return false, fmt.Errorf("realfmt: stats matcher regex %q: %w", p.GetSafeRegex().GetRegex(), err)
		}
		return re.MatchString(s), nil
	}
	return false, fmt.Errorf("realfmt: string matcher %v is not modelled", p)
}

// Extract is Envoy's tag extraction of name: the tag-extracted name and its tags, in the order the
// specifiers found them. TagSpecifier's regex (go-control-plane envoy/config/metrics/v3/
// stats.pb.go, TagSpecifier_Regex): every specifier sees the original name; the first capture
// group is the part removed from the name, the second (else the first) the tag's value; the
// removals happen after all specifiers ran. Envoy's default tag extractors are not modelled:
// Extract fails unless use_all_default_tags is false, as Istio's bootstrap sets it.
//
// Envoy runs these regexes as ECMAScript (std::regex), which has lookahead, and RE2 here has not:
// a regex RE2 cannot compile is skipped only when its literal start ("^listener" of "^listener(?=
// ...") shows that it cannot match name; otherwise Extract fails.
func (s EnvoyStats) Extract(name string) (string, []Tag, error) {
	if u := s.Config.GetUseAllDefaultTags(); u == nil || u.GetValue() {
		return "", nil, fmt.Errorf("realfmt: stats_config uses Envoy's default tags (use_all_default_tags unset or true), which are not modelled")
	}
	var tags []Tag
	var cuts [][2]int
	for _, t := range s.Config.GetStatsTags() {
		if _, fixed := t.GetTagValue().(*metricsv3.TagSpecifier_FixedValue); fixed {
			tags = append(tags, Tag{Name: t.GetTagName(), Value: t.GetFixedValue()})
			continue
		}
		expr := t.GetRegex()
		if expr == "" {
			return "", nil, fmt.Errorf("realfmt: tag %s names one of Envoy's default regexes, which are not modelled", t.GetTagName())
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			if lit := literalStart(expr); lit != "" && !strings.HasPrefix(name, lit) {
				continue
			}
			return "", nil, fmt.Errorf("realfmt: tag %s: regex %q (RE2: %v) may apply to %q", t.GetTagName(), expr, err, name)
		}
		m := re.FindStringSubmatchIndex(name)
		if len(m) < 4 || m[2] < 0 {
			continue // no match, or no capture group: no tag
		}
		value := name[m[2]:m[3]]
		if len(m) >= 6 && m[4] >= 0 {
			value = name[m[4]:m[5]]
		}
		tags = append(tags, Tag{Name: t.GetTagName(), Value: value})
		cuts = append(cuts, [2]int{m[2], m[3]})
	}
	removed := make([]bool, len(name))
	for _, c := range cuts {
		for i := c[0]; i < c[1]; i++ {
			removed[i] = true
		}
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if !removed[i] {
			b.WriteByte(name[i])
		}
	}
	return b.String(), tags, nil
}

// literalStart is the literal text an anchored regex starts with ("" when it is not anchored).
func literalStart(expr string) string {
	if !strings.HasPrefix(expr, "^") {
		return ""
	}
	var b strings.Builder
	for _, r := range expr[1:] {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Tag is one tag Envoy extracted from a stat name.
type Tag struct{ Name, Value string }

var promInvalid = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// PrometheusName is the name /stats/prometheus writes for a tag-extracted stat name: "envoy_"
// and the name with every character outside [a-zA-Z0-9_] replaced by "_" (envoyproxy/envoy
// source/server/admin/prometheus_stats_formatter.cc, metricName and sanitizeName, at
// de620cf5e5e3d117e462cea375f56b6b7d64c26e), for a name in no custom stat namespace.
func PrometheusName(extracted string) string {
	return "envoy_" + promInvalid.ReplaceAllString(extracted, "_")
}

// PrometheusCounters is /stats/prometheus for counters (by full stat name) on an Envoy with this
// stats_config: the stats the matcher leaves out are absent; the others are grouped by
// Prometheus name, one TYPE line each, and written "name{tags} value" (envoyproxy/envoy
// source/server/admin/prometheus_stats_render.cc at 54a173026b8b4d607d9bcc095f5075ac6bee02e1:
// braces even without tags; tag names sanitized as metric names are, formattedTags in
// prometheus_stats_formatter.cc).
func (s EnvoyStats) PrometheusCounters(counters map[string]uint64) (string, error) {
	type sample struct {
		tags  string
		value uint64
	}
	families := map[string][]sample{}
	for name, v := range counters {
		in, err := s.Instantiated(name)
		if err != nil {
			return "", err
		}
		if !in {
			continue
		}
		extracted, tags, err := s.Extract(name)
		if err != nil {
			return "", err
		}
		pairs := make([]string, 0, len(tags))
		for _, t := range tags {
			pairs = append(pairs, promInvalid.ReplaceAllString(t.Name, "_")+"="+strconv.Quote(t.Value))
		}
		pn := PrometheusName(extracted)
		families[pn] = append(families[pn], sample{tags: strings.Join(pairs, ","), value: v})
	}
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "# TYPE %s counter\n", n)
		samples := families[n]
		sort.Slice(samples, func(i, j int) bool { return samples[i].tags < samples[j].tags })
		for _, smp := range samples {
			fmt.Fprintf(&b, "%s{%s} %d\n", n, smp.tags, smp.value)
		}
	}
	return b.String(), nil
}
