// Package topology describes which clusters a run builds: their names, networks and roles
// (primary or remote), and the loopback address plan the local provider gives each one.
//
// A topology is generated (Generate: N primaries, one network each) or loaded from a file
// (Load): either ambientmc's own YAML/JSON or the JSON array Istio's prow jobs use
// (istio/istio prow/config/topology/*.json), so Istio's topologies run unchanged.
package topology
