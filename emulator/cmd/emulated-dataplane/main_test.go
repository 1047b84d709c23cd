package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/realfmt"
	"github.com/ambientmc/ambientmc/framework/realfmt/eastwest"
)

// The emulated gateway writes its tunnel counter exactly as a real east-west gateway's Envoy
// writes it when its pod asks for http.connect_terminate stats: the bootstrap pilot-agent renders
// from Istio's template for the gateway's pod, applied to the stat as Envoy applies it
// (realfmt/eastwest, realfmt.EnvoyStats).
func TestGatewayStatsAreARealGatewaysEnvoys(t *testing.T) {
	stats, err := eastwest.Stats(map[string]string{realfmt.EnvoyStatsInclusionAnnotation: "http." + realfmt.ConnectTerminateStatPrefix})
	require.NoError(t, err)
	want, err := stats.PrometheusCounters(map[string]uint64{realfmt.ConnectTerminateRequests: 7})
	require.NoError(t, err)
	var got bytes.Buffer
	writeGatewayStats(&got, 7)
	assert.Equal(t, want, got.String())
}
