package main

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/provider/kind"
)

// TestRenderKindTenClusters is the done-when line: -provider=kind -clusters=10 writes kind configs
// that decode strictly as v1alpha4 with 10 distinct pod and service subnets, MetalLB pools that do
// not overlap, and istiods and ztunnels that carry their own cluster and network.
func TestRenderKindTenClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("renders Istio for 10 clusters")
	}
	out := t.TempDir()
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"-provider=kind", "-clusters=10", "-istio.hub=example.com/hub", "-istio.tag=t1", "-probes=false", "-out", out}, &stdout, io.Discard))
	var ranges, pools []netip.Prefix
	for i := 1; i <= 10; i++ {
		name, network := fmt.Sprintf("cluster-%d", i), fmt.Sprintf("network-%d", i)
		dir := filepath.Join(out, name)
		data, err := os.ReadFile(filepath.Join(dir, "kind-config.yaml"))
		require.NoError(t, err)
		cfg, err := kind.DecodeConfig(data)
		require.NoError(t, err, "%s: strict v1alpha4", name)
		assert.Equal(t, kind.KindName(name), cfg.Name)
		assert.Contains(t, cfg.KubeadmConfigPatches[0], "apiVersion: kubeadm.k8s.io/v1beta4", "the default v1.37 image takes v1beta4")
		ranges = append(ranges, netip.MustParsePrefix(cfg.Networking.PodSubnet), netip.MustParsePrefix(cfg.Networking.ServiceSubnet))
		for _, o := range decode(t, filepath.Join(dir, "metallb-pool.yaml")) {
			if o.GetKind() == "IPAddressPool" {
				addrs, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "addresses")
				require.Len(t, addrs, 1)
				pools = append(pools, netip.MustParsePrefix(addrs[0]))
			}
		}
		_, env := workload(t, filepath.Join(dir, "03-istiod.yaml"), "Deployment", "istiod")
		assert.Equal(t, name, env["CLUSTER_ID"])
		_, env = workload(t, filepath.Join(dir, "05-ztunnel.yaml"), "DaemonSet", "ztunnel")
		assert.Equal(t, name, env["ISTIO_META_CLUSTER_ID"])
		assert.Equal(t, network, env["NETWORK"])
	}
	require.Len(t, ranges, 20)
	require.Len(t, pools, 10)
	for _, set := range [][]netip.Prefix{ranges, pools} {
		for i := range set {
			for j := i + 1; j < len(set); j++ {
				assert.False(t, set[i].Overlaps(set[j]), "%s overlaps %s", set[i], set[j])
			}
		}
	}
	kindNet := netip.MustParsePrefix(kind.DefaultNetworkSubnet)
	for _, p := range pools {
		assert.True(t, kindNet.Contains(p.Addr()), "pool %s inside the kind network %s", p, kindNet)
	}
}

func TestRenderKindRefusesUnknownImageTag(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	err := run([]string{"-provider=kind", "-kind.image=kindest/node:latest", "-istio.hub=h", "-istio.tag=t", "-out", out}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-kind.image=kindest/node:latest")
	assert.NoDirExists(t, out, "nothing written before the error")
}
