package kindnode

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/emulator/dataplane/netns"
)

// TestTunnelCrossesAnInternalDockerNetwork builds what the run's Docker network is, in network
// namespaces instead of containers: two "nodes" on a bridge whose host side drops bridged traffic
// from or to addresses outside its subnet, as Docker's rules for an --internal network do. A route
// between the nodes for a pod range carries nothing there (what the earlier provider did); the
// tunnel carries TCP to the peer's pod range and keeps the source address, and a second run of
// the script changes nothing.
func TestTunnelCrossesAnInternalDockerNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	for _, tool := range []string{"ip", "iptables", "bridge"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	sub := netip.MustParsePrefix("172.30.0.0/16")
	a := TunnelEnd{Index: 1, NodeIP: netip.MustParseAddr("172.30.0.2"), Pods: netip.MustParsePrefix("10.11.0.0/16"), Services: netip.MustParsePrefix("10.101.0.0/20")}
	b := TunnelEnd{Index: 3, NodeIP: netip.MustParseAddr("172.30.0.3"), Pods: netip.MustParsePrefix("10.13.0.0/16"), Services: netip.MustParsePrefix("10.103.0.0/20")}
	podB := netip.MustParseAddr("10.13.0.5")

	id := fmt.Sprintf("%d", os.Getpid()%100000)
	host, nsA, nsB := "amct-h"+id, "amct-a"+id, "amct-b"+id
	for _, n := range []string{host, nsA, nsB} {
		nsRun(t, "", "ip", "netns", "add", n)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n).Run() })
		nsRun(t, n, "ip", "link", "set", "lo", "up")
	}
	// The host side: a bridge with Docker's rules for an internal network.
	nsRun(t, host, "ip", "link", "add", "br0", "type", "bridge")
	nsRun(t, host, "ip", "link", "set", "br0", "up")
	if err := exec.Command("ip", "netns", "exec", host, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1").Run(); err != nil {
		t.Skipf("bridged traffic cannot pass iptables in a namespace here: %v", err)
	}
	nsRun(t, host, "iptables", "-w", "-A", "FORWARD", "-i", "br0", "!", "-d", sub.String(), "-j", "DROP")
	nsRun(t, host, "iptables", "-w", "-A", "FORWARD", "-o", "br0", "!", "-s", sub.String(), "-j", "DROP")
	for _, e := range []struct {
		ns  string
		end TunnelEnd
	}{{nsA, a}, {nsB, b}} {
		hostSide := "v" + e.ns
		nsRun(t, host, "ip", "link", "add", hostSide, "type", "veth", "peer", "name", "eth0", "netns", e.ns)
		nsRun(t, host, "ip", "link", "set", hostSide, "master", "br0", "up")
		nsRun(t, e.ns, "ip", "addr", "add", netip.PrefixFrom(e.end.NodeIP, sub.Bits()).String(), "dev", "eth0")
		nsRun(t, e.ns, "ip", "link", "set", "eth0", "up")
		nsRun(t, e.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	}
	// A pod address on node b, and a listener there on every address (kubelet's stand-in).
	nsRun(t, nsB, "ip", "addr", "add", podB.String()+"/32", "dev", "lo")
	f, err := os.Open("/run/netns/" + nsB)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	l, err := netns.FromFile(f).Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	accepted := make(chan net.Addr, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr()
			c.Close()
		}
	}()
	dialPod := fmt.Sprintf("timeout 3 bash -c '</dev/tcp/%s/%d'", podB, port)

	// The nodes reach each other on the network, but a route for the pod range carries nothing.
	nsRun(t, nsA, "bash", "-c", fmt.Sprintf("timeout 3 bash -c '</dev/tcp/%s/%d'", b.NodeIP, port))
	<-accepted
	nsRun(t, nsA, "ip", "route", "add", b.Pods.String(), "via", b.NodeIP.String())
	assert.Error(t, exec.Command("ip", "netns", "exec", nsA, "bash", "-c", dialPod).Run(),
		"a routed pod range crossed the bridge: the namespace does not reproduce Docker's internal network")
	nsRun(t, nsA, "ip", "route", "del", b.Pods.String())

	for range 2 {
		nsRun(t, nsA, "sh", "-c", TunnelScript(a, []TunnelEnd{b}))
		nsRun(t, nsB, "sh", "-c", TunnelScript(b, []TunnelEnd{a}))
	}
	nsRun(t, nsA, "bash", "-c", dialPod)
	select {
	case from := <-accepted:
		src := netip.MustParseAddrPort(from.String()).Addr()
		assert.True(t, a.Pods.Contains(src), "the peer saw %s, not an address of the sender's pod range %s", src, a.Pods)
	case <-time.After(5 * time.Second):
		t.Fatal("no connection reached the peer's pod address")
	}
	nsRun(t, nsA, "bash", "-c", TunnelCheckScript([]TunnelEnd{b}, port))
	<-accepted
	fa, err := os.Open("/run/netns/" + nsA)
	require.NoError(t, err)
	t.Cleanup(func() { fa.Close() })
	la, err := netns.FromFile(fa).Listen("tcp", fmt.Sprintf("0.0.0.0:%d", port))
	require.NoError(t, err)
	t.Cleanup(func() { la.Close() })
	nsRun(t, nsB, "bash", "-c", TunnelCheckScript([]TunnelEnd{a}, port))

	// Idempotent: one rule of each kind, not one per run.
	for _, chk := range []struct{ table, chain, want string }{
		{"nat", "POSTROUTING", "-d " + b.Pods.String()},
		{"mangle", "FORWARD", "TCPMSS"},
	} {
		out := nsOutput(t, nsA, "iptables", "-w", "-t", chk.table, "-S", chk.chain)
		assert.Equal(t, 1, strings.Count(out, chk.want), "%s %s after two runs:\n%s", chk.table, chk.chain, out)
	}
	mtu := nsOutput(t, nsA, "cat", "/sys/class/net/"+TunnelDevice+"/mtu")
	assert.Equal(t, "1450", strings.TrimSpace(mtu))

	// A peer that is not there fails the check, naming it.
	ghost := TunnelEnd{Index: 9, NodeIP: netip.MustParseAddr("172.30.0.9"), Pods: netip.MustParsePrefix("10.19.0.0/16"), Services: netip.MustParsePrefix("10.109.0.0/20")}
	nsRun(t, nsA, "sh", "-c", TunnelScript(a, []TunnelEnd{b, ghost}))
	out, err := exec.Command("ip", "netns", "exec", nsA, "bash", "-c", TunnelCheckScript([]TunnelEnd{b, ghost}, port)).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "no TCP connection to 10.19.0.0:")
}

// nsRun runs a command in the named network namespace ("" for this one) and fails the test on error.
func nsRun(t *testing.T, ns string, name string, args ...string) {
	t.Helper()
	nsOutput(t, ns, name, args...)
}

func nsOutput(t *testing.T, ns string, name string, args ...string) string {
	t.Helper()
	if ns != "" {
		args = append([]string{"netns", "exec", ns, name}, args...)
		name = "ip"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	return string(out)
}
