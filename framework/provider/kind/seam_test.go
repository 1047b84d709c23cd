package kind

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	kinderrors "sigs.k8s.io/kind/pkg/errors"
	kindexec "sigs.k8s.io/kind/pkg/exec"
)

// kind keeps a failed node command's output inside its error but prints only the command; the
// create error must show the message kubeadm printed, not the stack trace it printed after it.
func TestCreateErrorShowsKubeadmMessageWithoutItsStackTrace(t *testing.T) {
	var out strings.Builder
	for i := range 40 {
		fmt.Fprintf(&out, "I1205 14:03:0%d.000000 1 round_trippers.go:632] GET https://172.31.0.3:6443/api/v1/nodes %d\n", i%10, i)
	}
	out.WriteString("error execution phase mark-control-plane: error patching Node: timed out waiting for the condition\n")
	for range 20 {
		out.WriteString("k8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/workflow.(*Runner).Run.func1\n\t/root/go/pkg/mod/k8s.io/kubernetes@v1.36.1/cmd/kubeadm/app/cmd/phases/workflow/runner.go:262\n")
	}
	run := &kindexec.RunError{Command: []string{"docker", "exec", "node", "kubeadm", "init"}, Output: []byte(out.String()), Inner: errors.New("exit status 1")}
	err := withCommandOutput(kinderrors.Wrap(run, "failed to init node with kubeadm"))

	msg := err.Error()
	if !strings.Contains(msg, "failed to init node with kubeadm") || !errors.As(err, new(*kindexec.RunError)) {
		t.Errorf("the error lost kind's own message or its RunError: %v", err)
	}
	if !strings.Contains(msg, "error execution phase mark-control-plane: error patching Node") {
		t.Errorf("the error does not show kubeadm's message:\n%s", msg)
	}
	if strings.Contains(msg, "runner.go") || strings.Contains(msg, "(*Runner)") {
		t.Errorf("the error shows kubeadm's stack trace:\n%s", msg)
	}
	if !strings.Contains(msg, "nodes 39") || strings.Contains(msg, "nodes 10\n") {
		t.Errorf("the error should end with the last 30 lines before the trace (the 11th to the 40th log line, then the message):\n%s", msg)
	}
	plain := errors.New("no command here")
	if got := withCommandOutput(plain); got != plain {
		t.Errorf("an error without a node command changed: %v", got)
	}
}
