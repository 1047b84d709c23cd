// Package kindnode is a kind node container: reach its API server from this host, run a script in
// it, check its egress guard and the pod range node IPAM gave it, wait until it is Ready (with the
// kubelet log's tail when not), join the nodes of clusters on one network with a VXLAN tunnel,
// load image archives into it and read the image names an archive holds.
package kindnode

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
)

// Reachable checks that this host routes to a node's API server before the run depends on it
// (Docker Desktop, for one, does not route to container addresses).
func Reachable(ctx context.Context, ip string) error {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, "6443"))
	if err != nil {
		return fmt.Errorf("this host cannot reach the node's API server at %s:6443 (%v): the framework reaches every cluster at its node's address on the run's docker network, which needs Docker on Linux", ip, err)
	}
	return conn.Close()
}

// Output runs a shell command in a node and returns its stdout.
func Output(n nodes.Node, script string) (string, error) {
	var out, errOut bytes.Buffer
	if err := n.Command("sh", "-c", script).SetStdout(&out).SetStderr(&errOut).Run(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", n.String(), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// Find is the node of ns named name.
func Find(ns []nodes.Node, name string) (nodes.Node, error) {
	for _, n := range ns {
		if n.String() == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %s", name)
}

// podCIDRWait bounds the wait for node IPAM's range.
const podCIDRWait = time.Minute

// Check checks what the framework's node image promises of node name of cluster index: the egress
// guard was in place before kubelet started, and node IPAM gave the node the pod range its CNI
// hands out (kindconfig.NodeRange).
func Check(ctx context.Context, c *cluster.Cluster, ns []nodes.Node, name string, index int) error {
	n, err := Find(ns, name)
	if err != nil {
		return err
	}
	out, err := Output(n, "iptables -w -S AMBIENTMC-EGRESS; echo ---; cat /run/ambientmc-guard-applied; systemctl show kubelet --timestamp=unix -p ExecMainStartTimestamp")
	if err != nil {
		return fmt.Errorf("reading the egress guard: %w", err)
	}
	if err := guardInPlace(out); err != nil {
		return err
	}
	want, err := kindconfig.NodeRange(index)
	if err != nil {
		return err
	}
	// The node is Ready before the controller-manager's node IPAM has always given it a range: an
	// empty one is waited for (a loaded host took longer than the Ready wait), a wrong one is not.
	var node *corev1.Node
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, podCIDRWait, true, func(ctx context.Context) (bool, error) {
		node, err = c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return node.Spec.PodCIDR != "", nil
	})
	if err != nil && node == nil {
		return err
	}
	if node.Spec.PodCIDR != want.String() {
		return fmt.Errorf("node IPAM gave node %s the pod range %q, but its CNI configuration hands out %s: pods would get addresses other nodes route elsewhere", name, node.Spec.PodCIDR, want)
	}
	return nil
}

// guardInPlace reads `iptables -S AMBIENTMC-EGRESS`, the guard's timestamp and kubelet's start
// (Check's script): the chain must end in a REJECT and the guard must predate kubelet.
func guardInPlace(out string) error {
	rules, stamps, _ := strings.Cut(out, "---")
	lines := strings.Split(strings.TrimSpace(rules), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "-j REJECT") || strings.Contains(last, "-d ") {
		return fmt.Errorf("the egress guard's chain AMBIENTMC-EGRESS does not end in a REJECT of everything else:\n%s", rules)
	}
	f := strings.Fields(stamps)
	if len(f) != 2 {
		return fmt.Errorf("cannot read when the egress guard and kubelet started: %q", stamps)
	}
	guard, err1 := strconv.ParseFloat(f[0], 64)
	kubelet, err2 := strconv.ParseFloat(strings.TrimPrefix(strings.TrimPrefix(f[1], "ExecMainStartTimestamp="), "@"), 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("cannot read when the egress guard and kubelet started: %q", stamps)
	}
	if guard >= kubelet {
		return fmt.Errorf("the egress guard was applied at %.3f, after kubelet started at %.0f", guard, kubelet)
	}
	return nil
}

// SummarizeGuard reads `iptables -L -nvx` of the guard's chain and INPUT into one line.
func SummarizeGuard(s string) string {
	var dns, other int64
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[2] != "REJECT" {
			continue
		}
		pkts, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if f[8] == "127.0.0.8/29" {
			dns += pkts
		} else if f[8] == "0.0.0.0/0" {
			other += pkts
		}
	}
	return fmt.Sprintf("egress guard rejected %d packets to Docker's DNS and %d to other addresses beyond this host", dns, other)
}
