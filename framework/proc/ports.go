package proc

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1: it binds n listeners on
// 127.0.0.1:0 at once (so the kernel hands out n different ports), records them and closes them.
//
// The ports are free only at that moment: another process may take one before the child binds
// it. That is rare, and callers must tolerate it by restarting the child on new ports when it
// exits early and Process.LogContains reports "address already in use".
func FreePorts(n int) ([]int, error) {
	if n < 0 {
		return nil, fmt.Errorf("FreePorts(%d): negative count", n)
	}
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free ports: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
