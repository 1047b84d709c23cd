// Package probeapp is the probe pods' application as the framework runs it in process: fortio's
// echo server on a pod's address, and fortio's load runs, with what the suites read of each.
package probeapp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"fortio.org/fortio/fhttp"

	"github.com/ambientmc/ambientmc/emulator/dataplane/addrmap"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// Echo is a probe pod's application: fortio's echo handler on the pod's own IP (its loopback
// twin, addrmap), served by an http.Server we own (fortio's Serve helpers cannot be shut down).
type Echo struct {
	Addr     netip.AddrPort // the pod's address and port, as the API and xDS have them
	Requests atomic.Int64
	srv      *http.Server
	done     chan struct{}
}

// ServedByHeader names the cluster whose endpoint answered, on every echo response (the fortio
// pods of real clusters set it through -echo-server-default-params).
const ServedByHeader = "X-Served-By"

// ServeEcho listens on ip:workload.EchoPort; every response says it was served by cluster.
func ServeEcho(ip netip.Addr, cluster string) (*Echo, error) {
	// The pod address is API data: the server listens on its loopback twin.
	l, err := addrmap.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(workload.EchoPort)))
	if err != nil {
		return nil, err
	}
	e := &Echo{Addr: netip.AddrPortFrom(ip, workload.EchoPort), done: make(chan struct{})}
	e.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.Requests.Add(1)
			w.Header().Set(ServedByHeader, cluster)
			fhttp.EchoHandler(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return
		}
	}()
	return e, nil
}

// Close stops the server.
func (e *Echo) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	<-e.done
	return err
}

// FetchServedBy gets url once with client and returns who served it (ServedByHeader); a status
// other than 200 is an error.
func FetchServedBy(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	return resp.Header.Get(ServedByHeader), nil
}

// FetchOver gets /echo once over conn, an open tunnel to the app (Host: host), and closes nothing;
// a status other than 200 is an error. For tests that open tunnels themselves.
func FetchOver(conn net.Conn, host string) error {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// debugFrom is how fortio's debug page (/debug) names the connection it answers.
var debugFrom = regexp.MustCompile(`request from (\S+)`)

// FetchSource gets a fortio server's debug page at url once and returns the address it saw the
// request come from: what the application sees of its caller.
func FetchSource(ctx context.Context, client *http.Client, url string) (netip.Addr, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return netip.Addr{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return netip.Addr{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return netip.Addr{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return netip.Addr{}, fmt.Errorf("status %s", resp.Status)
	}
	m := debugFrom.FindSubmatch(body)
	if m == nil {
		return netip.Addr{}, fmt.Errorf("no %q in fortio's debug page: %.200q", "request from", body)
	}
	ap, err := netip.ParseAddrPort(string(m[1]))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("fortio's debug page: %w", err)
	}
	return ap.Addr().Unmap(), nil
}
