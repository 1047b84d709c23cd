package cluster

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

func TestClientWaitsCountsOnlyRealWaits(t *testing.T) {
	w := &ClientWaits{}
	l := countingLimiter{flowcontrol.NewTokenBucketRateLimiter(20, 1), w}
	if err := l.Wait(context.Background()); err != nil { // the burst's one token: no wait
		t.Fatal(err)
	}
	if n, _ := w.Waited(); n != 0 {
		t.Fatalf("a request the bucket let through at once counted as a wait (%d)", n)
	}
	l.Accept() // the bucket is empty: ~50 ms at 20 QPS
	n, d := w.Waited()
	if n != 1 || d < 30*time.Millisecond {
		t.Fatalf("want one wait of ~50 ms, got %d totalling %s", n, d)
	}
}
