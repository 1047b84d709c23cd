package incluster

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"fortio.org/fortio/fhttp"
	"fortio.org/fortio/periodic"
	"fortio.org/fortio/stats"
	fortiolog "fortio.org/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/probeapp"
)

// serve runs h on a loopback port until the test ends and returns its base URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// fortioPod serves what this provider uses of the probe client pod's fortio server: the fetch
// proxy (fortio's own fhttp.FetcherHandler, mounted as fortio's ui package mounts it) and the
// REST run API. The REST handler is a stand-in (fakeRESTRun): fortio's rapi package imports its
// gRPC runner, whose dependencies (jhump/protoreflect) are not in go.mod.
func fortioPod(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/fortio/rest/run", fakeRESTRun)
	mux.Handle("/fortio/fetch/", http.StripPrefix("/fortio/fetch/", http.HandlerFunc(fhttp.FetcherHandler)))
	return serve(t, mux)
}

// fakeRESTRun maps the JSON body to runner options as rapi.RESTRunHandler does (fortio v1.75.3
// rapi/restHandler.go: string values only; "t", "c", "qps", "r", "p", "uniform",
// "connection-reuse"), with fortio's own parsers, runs fortio's HTTP runner and replies with its
// results as JSON.
func fakeRESTRun(w http.ResponseWriter, r *http.Request) {
	var jd map[string]any
	if err := json.NewDecoder(r.Body).Decode(&jd); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	str := func(k string) string { v, _ := jd[k].(string); return v }
	if str("url") == "" {
		http.Error(w, `{"message":"URL is required"}`, http.StatusBadRequest)
		return
	}
	dur, err := time.ParseDuration(str("t"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o := &fhttp.HTTPRunnerOptions{}
	o.RunnerOptions = periodic.RunnerOptions{Duration: dur, Out: io.Discard, Uniform: str("uniform") == "on"}
	o.QPS, _ = strconv.ParseFloat(str("qps"), 64)
	o.NumThreads, _ = strconv.Atoi(str("c"))
	o.RunnerOptions.Resolution, _ = strconv.ParseFloat(str("r"), 64)
	o.Percentiles, _ = stats.ParsePercentiles(str("p"))
	o.URL = str("url")
	if err := o.ValidateAndSetConnectionReuseRange(str("connection-reuse")); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	res, err := fhttp.RunHTTPTest(o)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_ = json.NewEncoder(w).Encode(res)
}

func TestRESTRunBodyIsWhatFortioReads(t *testing.T) {
	o := probeapp.FortioOptions("http://echo-remote.probe.svc.cluster.local:80/echo?size=1024",
		probe.Load{QPS: 250, Duration: 3 * time.Second, Connections: 16, NewConnections: true})
	body, err := restRunBody(o)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, map[string]any{
		"url": o.URL, "qps": "250", "t": "3s", "c": "16", "r": "1e-05", "p": "50,90,99",
		"uniform": "on", "connection-reuse": "1",
	}, got, "every value a string: rapi.FormValue ignores anything else")
}

// A real fortio run (fortio's runner, options parsed as fortio's REST API parses them) against a real echo server: the results come back as
// fortio's JSON, and new connections mean one socket per call.
func TestRunRESTRoundTripThroughFortio_FakeRESTHandler(t *testing.T) {
	fortiolog.SetLogLevelQuiet(fortiolog.Error)
	echo := serve(t, http.HandlerFunc(fhttp.EchoHandler))
	api := fortioPod(t)
	ctx := context.Background()
	for _, newConns := range []bool{true, false} {
		l := probe.Load{QPS: 100, Duration: 500 * time.Millisecond, Connections: 2, NewConnections: newConns}
		o := probeapp.FortioOptions(echo+"/echo?size=64", l)
		res, err := runREST(ctx, api, o)
		require.NoError(t, err)
		assert.Equal(t, 2, res.NumThreads)
		assert.Equal(t, "100", res.RequestedQPS)
		assert.True(t, res.Uniform)
		assert.Equal(t, o.URL, res.URL)
		require.Positive(t, res.DurationHistogram.Count)
		assert.Equal(t, res.DurationHistogram.Count, res.RetCodes[200], "every call answered 200")
		if newConns {
			assert.GreaterOrEqual(t, res.SocketCount, res.DurationHistogram.Count, "a new connection per call")
		} else {
			assert.Equal(t, int64(2), res.SocketCount, "one connection per thread")
		}
		r := probeapp.FortioResult(res, l.Connections)
		assert.Equal(t, res.DurationHistogram.Count, r.Requests)
		assert.Contains(t, r.Percentiles, 99.0)
	}
	_, err := runREST(ctx, api, probeapp.FortioOptions("", probe.Load{QPS: 1, Duration: time.Second, Connections: 1}))
	require.ErrorContains(t, err, "fortio REST run", "fortio's error reply is an error")
}

// The echo servers add x-served-by only to requests without a query string, and fortio's fetch
// proxy passes the upstream response through with its headers.
func TestFetchServedByThroughFortioFetchProxy(t *testing.T) {
	fortiolog.SetLogLevelQuiet(fortiolog.Error)
	require.NoError(t, fhttp.DefaultEchoServerParams.Set("header="+install.ServedByHeader+":cluster-2"))
	t.Cleanup(func() { _ = fhttp.DefaultEchoServerParams.Set("") })
	echo := serve(t, http.HandlerFunc(fhttp.EchoHandler))
	api := fortioPod(t)
	by, err := fetchServedBy(context.Background(), api, echo+"/echo")
	require.NoError(t, err)
	assert.Equal(t, "cluster-2", by)

	_, err = fetchServedBy(context.Background(), api, echo+"/echo?status=503")
	require.ErrorContains(t, err, "503")
}
