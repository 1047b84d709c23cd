// Package realfmt is what the real ztunnel and the real Envoy (started by pilot-agent with Istio's
// bootstrap) write in the outputs the framework reads from them when a user runs real images:
// ztunnel's /config_dump and /metrics, and the east-west gateway's /stats/prometheus. Every name
// here cites where its upstream source defines it, so that the tests of the readers (framework/
// incluster) and of the emulator that stands in for them (emulator/dataplane/inpod,
// emulator/cmd/emulated-dataplane) take their fixtures from upstream, not from the emulator's own output.
//
// Sources:
//   - ztunnel: github.com/istio/ztunnel at ZtunnelCommit (file:line citations below are at it).
//   - Envoy's API: the go-control-plane module in go.mod (its generated types carry the .proto
//     comments quoted below); Envoy's own code: github.com/envoyproxy/envoy, files named below.
//   - Istio: the istio.io/istio module in go.mod (its bootstrap template and renderer are used
//     as they are, not copied).
package realfmt
