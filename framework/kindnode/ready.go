package kindnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// kubeletTailLines is how much of the kubelet's journal a not-Ready error carries.
const kubeletTailLines = 15

// NotReadyError is a control-plane node that was not Ready when -kind.wait ran out.
type NotReadyError struct {
	kindName, node string
	wait           time.Duration
	state          string // the node's conditions, or why they could not be read
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("kind created %s, but its control-plane node %s is not Ready within -kind.wait=%s (kind's own wait logs a warning and returns no error): %s; raise -kind.wait if the node is only slow, else its kubelet log says why",
		e.kindName, e.node, e.wait, e.state)
}

// WaitReady checks node's Ready condition through the API server until it is True or
// deadline passes (at least once: kind's own wait may have used all of -kind.wait already).
func WaitReady(ctx context.Context, c *cluster.Cluster, kindName, node string, wait time.Duration, deadline time.Time) error {
	state := "not read yet"
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := c.Client.CoreV1().Nodes().Get(rctx, node, metav1.GetOptions{})
		cancel()
		switch {
		case err != nil:
			state = "reading the node: " + err.Error()
		case nodeReady(n):
			return nil
		default:
			state = conditions(n)
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return &NotReadyError{kindName: kindName, node: node, wait: wait, state: state}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// conditions lists a node's conditions as "Type=Status Reason: Message".
func conditions(n *corev1.Node) string {
	if len(n.Status.Conditions) == 0 {
		return "the node reports no conditions (its kubelet never posted a status)"
	}
	var out []string
	for _, c := range n.Status.Conditions {
		s := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" || c.Message != "" {
			s += " " + strings.TrimSpace(c.Reason+": "+c.Message)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// KubeletTail returns the last lines of the node's kubelet journal from the logs kind collected
// under logs (kind writes <logs>/<cluster>/<node>/kubelet.log), or "".
func KubeletTail(logs string, e *NotReadyError) string {
	path := filepath.Join(logs, e.kindName, e.node, "kubelet.log")
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > kubeletTailLines {
			lines = lines[1:]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nlast %d lines of %s:", len(lines), path)
	for _, l := range lines {
		b.WriteString("\n  " + l)
	}
	return b.String()
}
