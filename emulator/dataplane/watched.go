package dataplane

import (
	"sync/atomic"

	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// Watched is an xDS watcher with a View of its current state kept ready for the connection path.
type Watched struct {
	w    *xdswatch.Watcher
	view atomic.Pointer[View]
	stop func()
}

// Watch follows w until Close.
func Watch(w *xdswatch.Watcher) *Watched {
	x := &Watched{w: w}
	x.stop = Follow(w, x.view.Store)
	return x
}

// View is istiod's state as last received.
func (x *Watched) View() *View { return x.view.Load() }

// Addresses are the resources last received, by name.
func (x *Watched) Addresses() map[string]*workloadapi.Address { return x.w.Addresses() }

// Source is the watcher itself, for another follower.
func (x *Watched) Source() AddressSource { return x.w }

// Close stops following and closes the stream.
func (x *Watched) Close() {
	x.stop()
	x.w.Close()
}
