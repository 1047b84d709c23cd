package incluster

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// forward is a port-forward to one pod through the API server (SPDY), listening on 127.0.0.1
// only. It ends when the pod goes or Close is called.
type forward struct {
	pod   string
	local map[int]int // pod port -> local port
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	err   error // why ForwardPorts returned, once done is closed
}

const forwardReadyTimeout = 30 * time.Second

// forwardPod forwards the given pod ports of ns/pod on ports the kernel picks; errors go to errOut.
func forwardPod(c *cluster.Cluster, ns, pod string, ports []int, errOut io.Writer) (*forward, error) {
	transport, upgrader, err := spdy.RoundTripperFor(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	u := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	specs := make([]string, len(ports))
	for i, p := range ports {
		specs[i] = "0:" + strconv.Itoa(p)
	}
	f := &forward{pod: pod, local: map[int]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, specs, f.stop, ready, io.Discard, errOut)
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(f.done)
		f.err = pf.ForwardPorts()
	}()
	select {
	case <-ready:
	case <-f.done:
		return nil, fmt.Errorf("port-forward to %s/%s ports %v: %v", ns, pod, ports, f.err)
	case <-time.After(forwardReadyTimeout):
		f.Close()
		return nil, fmt.Errorf("port-forward to %s/%s ports %v: not ready after %s", ns, pod, ports, forwardReadyTimeout)
	}
	got, err := pf.GetPorts()
	if err != nil {
		f.Close()
		return nil, err
	}
	for _, p := range got {
		f.local[int(p.Remote)] = int(p.Local)
	}
	return f, nil
}

// addr is the local address forwarding to the pod's port.
func (f *forward) addr(podPort int) string {
	return "127.0.0.1:" + strconv.Itoa(f.local[podPort])
}

func (f *forward) Close() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

// lineWriter prefixes each write (client-go's port-forward error lines) and sends it to w.
type lineWriter struct {
	prefix string
	w      io.Writer
}

func (l lineWriter) Write(p []byte) (int, error) {
	_, err := fmt.Fprintf(l.w, "%s%s\n", l.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), err
}
