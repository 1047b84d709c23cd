package kind

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/kindconfig"
)

// kind's own wait for Ready (CreateWithWaitForReady) logs a warning and returns nil on timeout; the
// provider must then fail the create itself, with the node's conditions and kind's logs.
func TestKindWaitFailsWhenTheNodeNeverGetsReadyFakeDocker(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Wait = 2 * time.Second })
	node := kindconfig.KindName("cluster-1") + "-control-plane"
	f.kind.notReady[node] = -1
	start := time.Now()
	_, err := f.p.Create(context.Background(), generate(t, 1))
	if err == nil {
		t.Fatal("Create succeeded with a control-plane node that never became Ready")
	}
	msg := err.Error()
	t.Log(msg)
	logs := filepath.Join(f.dir, "logs")
	for _, want := range []string{
		"cluster cluster-1: kind created " + kindconfig.KindName("cluster-1") + ", but its control-plane node " + node + " is not Ready within -kind.wait=2s",
		"Ready=False KubeletNotReady: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady",
		"MemoryPressure=False KubeletHasSufficientMemory",
		"raise -kind.wait",
		"last 15 lines of " + filepath.Join(logs, kindconfig.KindName("cluster-1"), node, "kubelet.log") + ":",
		"line=29", // the journal's last line
		"(kind logs in " + logs + ")",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if strings.Contains(msg, "line=14") {
		t.Errorf("error carries more than the kubelet log's tail")
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %s: the check is bounded by -kind.wait", took)
	}
	if f.kind.alive() != 0 {
		t.Errorf("%d clusters left after the failed create", f.kind.alive())
	}
}

func TestKindWaitPassesOnceTheNodeIsReadyFakeDocker(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Wait = time.Minute })
	f.kind.notReady[kindconfig.KindName("cluster-1")+"-control-plane"] = 2
	if _, err := f.p.Create(context.Background(), generate(t, 1)); err != nil {
		t.Fatal(err)
	}
	if f.kind.nodeReads != 3 {
		t.Errorf("%d reads of the node, want 3: two NotReady, then Ready", f.kind.nodeReads)
	}
}
