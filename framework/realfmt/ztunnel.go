package realfmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ZtunnelCommit is the github.com/istio/ztunnel commit every ztunnel citation here is at
// (2026-08-20, "Automator: update common-files@master in istio/ztunnel@master (#2061)").
const ZtunnelCommit = "62d826530e5ce85764e309170205b293efcbc80b"

// ztunnel's admin and stats endpoints.
const (
	// ZtunnelAdminPort serves /config_dump, bound on localhost only: src/config.rs:97
	// DEFAULT_ADMIN_PORT, src/config.rs:831-835 (admin_addr: Address::Localhost).
	ZtunnelAdminPort = 15000
	// ZtunnelConfigDumpPath is the admin path of the dump: src/admin.rs:139.
	ZtunnelConfigDumpPath = "/config_dump"
	// ZtunnelStatsPort serves the metrics on every address: src/config.rs:99 DEFAULT_STATS_PORT,
	// src/config.rs:836-839 (stats_addr on bind_wildcard).
	ZtunnelStatsPort = 15020
	// ZtunnelMetricsPath is one of the two paths the stats server answers ("/metrics" |
	// "/stats/prometheus"): src/metrics/server.rs:64.
	ZtunnelMetricsPath = "/metrics"
)

// ztunnel's connection counter. Its registry is the "istio" sub-registry (src/metrics.rs:35-36,
// used for the proxy metrics at src/app.rs:82) and the family is registered as
// "tcp_connections_opened" (src/proxy/metrics.rs:356-357). prometheus-client (0.24.1,
// Cargo.lock:2773-2774) encodes OpenMetrics text: the HELP and TYPE lines name the family, the
// counter's samples carry the _total suffix (tests/direct.rs:365-369 on the HELP line's name,
// tests/direct.rs:452 and README.md:112 on the sample's), the help gets a "." appended
// (prometheus-client's Descriptor::new), the exposition ends with "# EOF", and a family without
// a series is not written at all (tests/direct.rs:355-358): a ztunnel that carried nothing has
// no istio_tcp_connections_opened.
const (
	ZtunnelConnectionsOpenedFamily = "istio_tcp_connections_opened"
	ZtunnelConnectionsOpened       = ZtunnelConnectionsOpenedFamily + "_total"
	ZtunnelConnectionsOpenedHelp   = "The total number of TCP connections opened."
)

// Label values ztunnel writes.
const (
	// ZtunnelUnknown is what a label of an unknown peer says: DefaultedUnknown,
	// src/metrics.rs:107-108.
	ZtunnelUnknown = "unknown"
	// Reporter values: src/proxy/metrics.rs:58-63 (label values are the variant names).
	ZtunnelReporterSource      = "source"
	ZtunnelReporterDestination = "destination"
	// ZtunnelMutualTLS is SecurityPolicy::mutual_tls, src/proxy/metrics.rs:109-113 (the default
	// is "unknown").
	ZtunnelMutualTLS = "mutual_tls"
	// ZtunnelTCP is RequestProtocol::tcp, src/proxy/metrics.rs:66-71 (every L4 connection).
	ZtunnelTCP = "tcp"
	// ZtunnelNoResponseFlags is ResponseFlags::None, src/proxy/metrics.rs:96.
	ZtunnelNoResponseFlags = "-"
)

// ZtunnelTrafficLabels are the labels of ztunnel's traffic counters in the order ztunnel writes
// them: the fields of CommonTrafficLabels, src/proxy/metrics.rs:259-286 (EncodeLabelSet's derive
// names a label after its field).
var ZtunnelTrafficLabels = []string{
	"reporter",                       // :260
	"source_workload",                // :262
	"source_canonical_service",       // :263
	"source_canonical_revision",      // :264
	"source_workload_namespace",      // :265
	"source_principal",               // :266
	"source_app",                     // :267
	"source_version",                 // :268
	"source_cluster",                 // :269
	"destination_service",            // :271
	"destination_service_namespace",  // :272
	"destination_service_name",       // :273
	"destination_workload",           // :275
	"destination_canonical_service",  // :276
	"destination_canonical_revision", // :277
	"destination_workload_namespace", // :278
	"destination_principal",          // :279
	"destination_app",                // :280
	"destination_version",            // :281
	"destination_cluster",            // :282
	"request_protocol",               // :284
	"response_flags",                 // :285
	"connection_security_policy",     // :286
}

// ZtunnelLocalityLabels follow the traffic labels when ztunnel knew a locality of either peer:
// LocalityLabels, src/proxy/metrics.rs:306-310, flattened in at :288-289 as an OptionallyEncode,
// which writes all four or none (:296-303).
var ZtunnelLocalityLabels = []string{"source_region", "source_zone", "destination_region", "destination_zone"}

// ztunnelLabelDefault is what ztunnel writes for a label nobody set: the enums' #[default]
// variants (src/proxy/metrics.rs:58-60 source, :66-68 tcp, :74-76 None, written "-" at :96,
// :109-111 unknown), "unknown" for every DefaultedUnknown.
func ztunnelLabelDefault(name string) string {
	switch name {
	case "reporter":
		return ZtunnelReporterSource
	case "request_protocol":
		return ZtunnelTCP
	case "response_flags":
		return ZtunnelNoResponseFlags
	}
	return ZtunnelUnknown
}

// ZtunnelSeries is one series of a ztunnel traffic counter: the labels a test sets, by ztunnel's
// label names; every other label is written as ztunnel writes an unset one.
type ZtunnelSeries struct {
	Labels map[string]string
	Value  uint64
}

// ZtunnelConnectionsOpenedText is the istio_tcp_connections_opened family as ztunnel's stats
// server writes it (HELP, TYPE, then one _total sample per series with every label, in ztunnel's
// order). It fails on a label name ztunnel does not write, so that a fixture cannot carry a name
// the real ztunnel never sends.
func ZtunnelConnectionsOpenedText(series ...ZtunnelSeries) (string, error) {
	if len(series) == 0 {
		return "", nil // prometheus-client leaves an empty family out
	}
	known := map[string]bool{}
	for _, l := range ZtunnelTrafficLabels {
		known[l] = true
	}
	locality := map[string]bool{}
	for _, l := range ZtunnelLocalityLabels {
		locality[l] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", ZtunnelConnectionsOpenedFamily, ZtunnelConnectionsOpenedHelp, ZtunnelConnectionsOpenedFamily)
	for _, s := range series {
		withLocality := false
		for name := range s.Labels {
			switch {
			case known[name]:
			case locality[name]:
				withLocality = true
			default:
				return "", fmt.Errorf("realfmt: ztunnel writes no label %q (src/proxy/metrics.rs:259-310 at %s)", name, ZtunnelCommit)
			}
		}
		names := ZtunnelTrafficLabels
		if withLocality {
			names = append(append([]string{}, ZtunnelTrafficLabels...), ZtunnelLocalityLabels...)
		}
		pairs := make([]string, 0, len(names))
		for _, name := range names {
			v, ok := s.Labels[name]
			if !ok || v == "" {
				v = ztunnelLabelDefault(name)
			}
			pairs = append(pairs, name+"="+strconv.Quote(v))
		}
		fmt.Fprintf(&b, "%s{%s} %d\n", ZtunnelConnectionsOpened, strings.Join(pairs, ","), s.Value)
	}
	return b.String(), nil
}

// ZtunnelBuildText is the istio_build gauge every ztunnel writes (src/metrics/meta.rs:32-42:
// a Gauge family, labels component and tag, set to 1).
func ZtunnelBuildText(tag string) string {
	return "# HELP istio_build Istio component build info.\n# TYPE istio_build gauge\n" +
		"istio_build{component=\"ztunnel\",tag=" + strconv.Quote(tag) + "} 1\n"
}

// ZtunnelExposition ends families as ztunnel's encoder ends every exposition.
func ZtunnelExposition(families ...string) string {
	return strings.Join(families, "") + "# EOF\n"
}

// dumpField is one JSON key ztunnel's /config_dump writes for a type: always says it is written
// even when empty (no skip_serializing_if), source is where the serialized field is declared.
type dumpField struct {
	always bool
	source string
}

// Keys of the dump, per object (every type derives Serialize with rename_all = "camelCase").
var (
	// The top level: ConfigDump, src/admin.rs:62-71, with ProxyStateSerialization flattened into
	// it (src/admin.rs:65-66; src/state.rs:184-191), and the key of the in-pod admin handler
	// (src/inpod/admin.rs:141-143), which src/admin.rs:344-346 inserts.
	ztunnelDumpTop = map[string]dumpField{
		"workloads":      {true, "src/state.rs:187"},
		"services":       {true, "src/state.rs:188"},
		"policies":       {true, "src/state.rs:189"},
		"stagedServices": {true, "src/state.rs:190"},
		"staticConfig":   {true, "src/admin.rs:67"},
		"version":        {true, "src/admin.rs:68"},
		"config":         {true, "src/admin.rs:69"},
		"certificates":   {true, "src/admin.rs:70"},
		"workloadState":  {false, "src/inpod/admin.rs:142"},
	}
	// Workload, src/state/workload.rs:229-293.
	ztunnelWorkload = map[string]dumpField{
		"workloadIps":           {true, "src/state/workload.rs:232"},
		"waypoint":              {false, "src/state/workload.rs:235"},
		"networkGateway":        {false, "src/state/workload.rs:237"},
		"protocol":              {true, "src/state/workload.rs:240"},
		"networkMode":           {true, "src/state/workload.rs:242"},
		"uid":                   {false, "src/state/workload.rs:245"},
		"name":                  {true, "src/state/workload.rs:247"},
		"namespace":             {true, "src/state/workload.rs:248"},
		"trustDomain":           {false, "src/state/workload.rs:250"},
		"serviceAccount":        {false, "src/state/workload.rs:252"},
		"network":               {false, "src/state/workload.rs:254"},
		"workloadName":          {false, "src/state/workload.rs:257"},
		"workloadType":          {false, "src/state/workload.rs:259"},
		"canonicalName":         {false, "src/state/workload.rs:261"},
		"canonicalRevision":     {false, "src/state/workload.rs:263"},
		"hostname":              {false, "src/state/workload.rs:266"},
		"node":                  {false, "src/state/workload.rs:269"},
		"nativeTunnel":          {false, "src/state/workload.rs:272"},
		"applicationTunnel":     {false, "src/state/workload.rs:274"},
		"authorizationPolicies": {false, "src/state/workload.rs:277"},
		"status":                {true, "src/state/workload.rs:280"},
		"clusterId":             {true, "src/state/workload.rs:283"},
		"locality":              {false, "src/state/workload.rs:286"},
		"services":              {false, "src/state/workload.rs:289"},
		"capacity":              {true, "src/state/workload.rs:292"},
	}
	// GatewayAddress, src/state/workload.rs:164-169 (destination: a NetworkAddress
	// "network/ip" or a NamespacedHostname "namespace/hostname", an untagged enum, :171-179).
	ztunnelGatewayAddress = map[string]dumpField{
		"destination":   {true, "src/state/workload.rs:167"},
		"hboneMtlsPort": {true, "src/state/workload.rs:168"},
	}
	// Locality, src/state/workload.rs:138-143 (no rename: the names are single words).
	ztunnelLocality = map[string]dumpField{
		"region":  {true, "src/state/workload.rs:140"},
		"zone":    {true, "src/state/workload.rs:141"},
		"subzone": {true, "src/state/workload.rs:142"},
	}
	// ApplicationTunnel, src/state/workload.rs:181-186.
	ztunnelApplicationTunnel = map[string]dumpField{
		"protocol": {true, "src/state/workload.rs:184"},
		"port":     {true, "src/state/workload.rs:185"},
	}
	// Service, src/state/service.rs:36-76.
	ztunnelService = map[string]dumpField{
		"name":              {true, "src/state/service.rs:39"},
		"namespace":         {true, "src/state/service.rs:40"},
		"hostname":          {true, "src/state/service.rs:41"},
		"vips":              {true, "src/state/service.rs:42"},
		"cidrVips":          {false, "src/state/service.rs:44"},
		"ports":             {true, "src/state/service.rs:45"},
		"endpoints":         {true, "src/state/service.rs:49"},
		"subjectAltNames":   {true, "src/state/service.rs:51"},
		"waypoint":          {false, "src/state/service.rs:54"},
		"weightedWaypoints": {false, "src/state/service.rs:61"},
		"loadBalancer":      {false, "src/state/service.rs:64"},
		"ipFamilies":        {false, "src/state/service.rs:67"},
		"canonical":         {true, "src/state/service.rs:70"},
		"visibility":        {true, "src/state/service.rs:75"},
	}
	// Endpoint, src/state/service.rs:337-348; a service's endpoints are a map by workload UID
	// (EndpointSet, src/state/service.rs:92-103).
	ztunnelEndpoint = map[string]dumpField{
		"workloadUid": {true, "src/state/service.rs:341"},
		"port":        {true, "src/state/service.rs:344"},
		"status":      {true, "src/state/service.rs:347"},
	}
	// LoadBalancer, src/state/service.rs:232-238.
	ztunnelLoadBalancer = map[string]dumpField{
		"routingPreferences": {true, "src/state/service.rs:235"},
		"mode":               {true, "src/state/service.rs:236"},
		"healthPolicy":       {true, "src/state/service.rs:237"},
	}
)

// Enum values in the dump (serde writes a unit variant as its name).
var (
	// HealthStatus, src/state/workload.rs:132-136.
	ztunnelHealth = []string{"Healthy", "Unhealthy"}
	// InboundProtocol, src/state/workload.rs:60-64 (xDS NONE is TCP: :72).
	ztunnelProtocol = []string{"TCP", "HBONE"}
	// NetworkMode, src/state/workload.rs:114-118.
	ztunnelNetworkMode = []string{"Standard", "HostNetwork"}
	// Visibility, src/state/service.rs:271-277.
	ztunnelVisibility = []string{"Public", "Namespace"}
	// IpFamily, src/state/service.rs:252-256.
	ztunnelIPFamily = []string{"Dual", "IPv4", "IPv6"}
)

// CheckZtunnelDump checks that a /config_dump uses only the keys and enum values ztunnel writes
// (at ZtunnelCommit), and that its workloads, services and endpoints carry every key ztunnel
// always writes. The keys readers do not read are checked too: a fixture that names a field
// ztunnel does not have is not a ztunnel dump.
func CheckZtunnelDump(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return fmt.Errorf("realfmt: ztunnel dump: %w", err)
	}
	c := &dumpCheck{}
	c.keys("the dump", top, ztunnelDumpTop, false)
	var workloads []map[string]json.RawMessage
	c.decode("workloads", top["workloads"], &workloads)
	for i, w := range workloads {
		at := fmt.Sprintf("workloads[%d]", i)
		c.keys(at, w, ztunnelWorkload, true)
		c.enum(at+".status", w["status"], ztunnelHealth)
		c.enum(at+".protocol", w["protocol"], ztunnelProtocol)
		c.enum(at+".networkMode", w["networkMode"], ztunnelNetworkMode)
		for _, k := range []string{"networkGateway", "waypoint"} {
			if raw, ok := w[k]; ok {
				c.object(at+"."+k, raw, ztunnelGatewayAddress)
			}
		}
		if raw, ok := w["locality"]; ok {
			c.object(at+".locality", raw, ztunnelLocality)
		}
		if raw, ok := w["applicationTunnel"]; ok {
			c.object(at+".applicationTunnel", raw, ztunnelApplicationTunnel)
		}
	}
	var services []map[string]json.RawMessage
	c.decode("services", top["services"], &services)
	for i, s := range services {
		at := fmt.Sprintf("services[%d]", i)
		c.keys(at, s, ztunnelService, true)
		c.enum(at+".visibility", s["visibility"], ztunnelVisibility)
		if raw, ok := s["ipFamilies"]; ok {
			c.enum(at+".ipFamilies", raw, ztunnelIPFamily)
		}
		if raw, ok := s["loadBalancer"]; ok {
			c.object(at+".loadBalancer", raw, ztunnelLoadBalancer)
		}
		var eps map[string]map[string]json.RawMessage
		c.decode(at+".endpoints", s["endpoints"], &eps)
		for uid, ep := range eps {
			eat := at + ".endpoints[" + uid + "]"
			c.keys(eat, ep, ztunnelEndpoint, true)
			c.enum(eat+".status", ep["status"], ztunnelHealth)
			var wl string
			if json.Unmarshal(ep["workloadUid"], &wl) == nil && wl != uid {
				c.add("%s: keyed by %q but its workloadUid is %q (EndpointSet is keyed by workload UID, src/state/service.rs:116-119)", eat, uid, wl)
			}
		}
	}
	return c.err()
}

type dumpCheck struct{ problems []string }

func (c *dumpCheck) add(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *dumpCheck) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	sort.Strings(c.problems)
	return errors.New("realfmt: not what ztunnel writes (istio/ztunnel " + ZtunnelCommit + "):\n  " + strings.Join(c.problems, "\n  "))
}

func (c *dumpCheck) decode(at string, raw json.RawMessage, into any) {
	if len(raw) == 0 {
		c.add("%s: missing", at)
		return
	}
	if err := json.Unmarshal(raw, into); err != nil {
		c.add("%s: %v", at, err)
	}
}

// keys reports keys of obj that ztunnel does not write, and (when required) keys it always
// writes that obj lacks.
func (c *dumpCheck) keys(at string, obj map[string]json.RawMessage, fields map[string]dumpField, required bool) {
	for k := range obj {
		if _, ok := fields[k]; !ok {
			c.add("%s: key %q is not one ztunnel writes", at, k)
		}
	}
	if !required {
		return
	}
	for k, f := range fields {
		if _, ok := obj[k]; f.always && !ok {
			c.add("%s: lacks %q, which ztunnel always writes (%s)", at, k, f.source)
		}
	}
}

func (c *dumpCheck) object(at string, raw json.RawMessage, fields map[string]dumpField) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		c.add("%s: %v", at, err)
		return
	}
	c.keys(at, obj, fields, true)
}

func (c *dumpCheck) enum(at string, raw json.RawMessage, values []string) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		c.add("%s: not a string: %s", at, raw)
		return
	}
	for _, want := range values {
		if v == want {
			return
		}
	}
	c.add("%s: %q is not one of ztunnel's %v", at, v, values)
}
