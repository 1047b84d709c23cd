package probeapp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"fortio.org/fortio/fhttp"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/stretchr/testify/require"
)

// A fortio run must leave the process's SIGINT handling as it found it: fortio's own catching
// resets SIGINT afterwards, which would remove the framework's Ctrl-C teardown (and, as here,
// let the next SIGINT kill the process).
func TestFortioRunLeavesSignalHandlingAlone(t *testing.T) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	defer signal.Stop(ch)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	o := FortioOptions(srv.URL, probe.Load{QPS: 50, Duration: 300 * time.Millisecond, Connections: 1})
	o.Out = io.Discard
	res, err := fhttp.RunHTTPTest(o)
	require.NoError(t, err)
	require.Positive(t, res.DurationHistogram.Count)
	time.Sleep(200 * time.Millisecond) // fortio's signal watcher ends after the run
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("SIGINT never reached the handler registered before the run")
	}
}

// FetchSource reads the caller's address from fortio's own debug page (the handler `fortio
// server` serves on /debug in the echo pods).
func TestFetchSourceReadsFortiosDebugPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(fhttp.DebugHandler))
	defer srv.Close()
	got, err := FetchSource(t.Context(), srv.Client(), srv.URL+"/debug")
	require.NoError(t, err)
	require.Equal(t, netip.MustParseAddr("127.0.0.1"), got)

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer plain.Close()
	_, err = FetchSource(t.Context(), plain.Client(), plain.URL)
	require.ErrorContains(t, err, "request from", "a page that names no caller is an error")
}
