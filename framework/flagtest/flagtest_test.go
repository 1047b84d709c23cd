package flagtest

import (
	"flag"
	"testing"
)

var probe = flag.Int("flagtest.probe", 1, "a flag for this package's test")

func TestSetRestoresTheOldValue(t *testing.T) {
	t.Run("set", func(t *testing.T) {
		Set(t, "flagtest.probe", "7")
		if *probe != 7 {
			t.Fatalf("-flagtest.probe = %d after Set, want 7", *probe)
		}
	})
	if *probe != 1 {
		t.Fatalf("-flagtest.probe = %d after the test, want 1 back", *probe)
	}
}
