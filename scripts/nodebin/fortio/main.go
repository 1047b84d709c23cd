// Command fortio is fortio's `server` command (an echo server with fortio's REST API), built from
// fortio.org/fortio's own packages at the version the main go.mod requires, so the probe pods speak
// the same REST API as the local provider's in-process fortio. fortio's own main cannot be built
// here: it imports grol (its script mode), whose module the proxy refuses.
package main

import (
	"flag"
	"fmt"
	"os"

	"fortio.org/fortio/bincommon"
	"fortio.org/fortio/stats"
	"fortio.org/fortio/ui"
)

func main() {
	port := flag.String("http-port", "8080", "`port` of the echo server, REST API and UI")
	debugPath := flag.String("echo-debug-path", "/debug", "`URI` of the debug handler")
	uiPath := flag.String("ui-path", "/fortio/", "`URI` of the UI and REST API")
	percentiles := flag.String("p", "50,75,90,99,99.9", "percentiles of the runs the REST API starts")
	bincommon.SharedMain() // fortio's shared flags, -echo-server-default-params among them
	if len(os.Args) < 2 || os.Args[1] != "server" {
		fmt.Fprintln(os.Stderr, "usage: fortio server [flags]  (only fortio's server command is built here)")
		os.Exit(2)
	}
	if err := flag.CommandLine.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	perc, err := stats.ParsePercentiles(*percentiles)
	if err != nil {
		fmt.Fprintln(os.Stderr, "-p:", err)
		os.Exit(2)
	}
	cfg := ui.ServerConfig{Port: *port, DebugPath: *debugPath, UIPath: *uiPath, PercentileList: perc,
		TLSOptions: &bincommon.SharedHTTPOptions().TLSOptions}
	if !ui.Serve(&cfg) {
		os.Exit(1) // fortio has logged why
	}
	select {}
}
