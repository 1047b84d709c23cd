package env

import (
	"fmt"
	"time"

	"github.com/ambientmc/ambientmc/framework/proc"
)

// Traffic stays on loopback where every process runs on this host: the sockets of the test
// process and of every process the framework starts are watched from setup to teardown, and a
// connection to any other address fails the run. Providers whose clusters live elsewhere (kind's
// Docker network, real clusters) talk to them off loopback by design and are not watched.

// loopbackPoll is how often the socket tables are read.
const loopbackPoll = 250 * time.Millisecond

// watchLoopback starts the watch when the provider runs every process on this host.
func (e *Env) watchLoopback() {
	if e.Provider.Facts().OnLoopback {
		e.connWatch = proc.WatchConnections(loopbackPoll)
	}
}

// checkLoopback stops the watch and fails the run (code 1) on any connection whose peer was not on
// loopback, naming each.
func (e *Env) checkLoopback(code int) int {
	if e.connWatch == nil {
		return code
	}
	r := e.connWatch.Stop()
	if r.Err != nil {
		fmt.Fprintf(e.Log, "FAIL: connection watch: reading the socket tables: %v\n", r.Err)
		return 1
	}
	if len(r.OffLoopback) > 0 {
		fmt.Fprintf(e.Log, "FAIL: %d connections left loopback (traffic must stay on 127.0.0.0/8):\n", len(r.OffLoopback))
		for _, c := range r.OffLoopback {
			fmt.Fprintf(e.Log, "  %s: %s\n", r.Names[c.Pid], c)
		}
		return 1
	}
	counted := "connected sockets in all"
	if r.Source == proc.SourceSockDiag {
		counted = "sockets of other processes off loopback in all"
	}
	e.Logf("connection watch: %d samples of the socket tables (%s; %d %s) while %d processes ran: none of theirs left loopback",
		r.Samples, r.Source, r.Connections, counted, r.Processes)
	return code
}
