// Package netns does socket work inside another network namespace, as ztunnel does for each pod
// istio-cni hands it: listeners and outbound sockets are created inside the pod's namespace (a
// socket keeps the namespace it was created in), and outbound ones carry ztunnel's mark so the
// pod's own capture rules let them pass.
package netns

import "os"

// Mark is ztunnel's packet mark (istio-cni's config.InpodMark, matched under mask 0xfff): istio-cni's
// in-pod iptables rules let sockets carrying it pass uncaptured, so ztunnel's own traffic is not
// redirected back to itself.
const Mark = 0x539

// NS is a network namespace, held open by a file (e.g. the netns fd a ZDS Add delivers, or
// /proc/<pid>/ns/net). NS does not own the file: closing it stays with the caller, who must keep it
// open while using NS.
type NS struct {
	f *os.File
}

// FromFile wraps an open network namespace file.
func FromFile(f *os.File) NS {
	return NS{f: f}
}
