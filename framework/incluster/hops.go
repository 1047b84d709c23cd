package incluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// hopEnv is the probes where the test host reaches the other network's hops (OnThisHost):
// the remote east-west gateway at its LoadBalancer address, echo-remote's HBONE listener through a
// port-forward into its pod (where ztunnel listens in in-pod mode).
type hopEnv struct {
	*probeEnv
	hops probe.Hops
	fwd  *forward
}

var _ probe.HopAccess = (*hopEnv)(nil)

func (h *hopEnv) Hops() probe.Hops { return h.hops }

func (h *hopEnv) Close() error {
	if h.fwd != nil {
		h.fwd.Close()
	}
	return h.probeEnv.Close()
}

// withHops adds the hops of s.Remote's side of the probe path to e.
func withHops(ctx context.Context, e *probeEnv, s probe.Setup) (*hopEnv, error) {
	r := s.Remote
	gw, err := install.EastWestAddress(ctx, r, time.Minute)
	if err != nil {
		return nil, err
	}
	gwAddr, err := netip.ParseAddr(gw)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: east-west gateway address %q: %w", r.Name, gw, err)
	}
	echo, err := readyPod(ctx, r, workload.ProbeNamespace, probe.EchoRemote)
	if err != nil {
		return nil, err
	}
	fwd, err := forwardPod(r, workload.ProbeNamespace, echo.Name, []int{hbone.Port},
		lineWriter{prefix: "ambientmc: " + r.Name + ": echo-remote HBONE port-forward: ", w: e.p.opts.Log})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", r.Name, err)
	}
	ztunnel, err := netip.ParseAddrPort(fwd.addr(hbone.Port))
	if err != nil {
		fwd.Close()
		return nil, err
	}
	return &hopEnv{probeEnv: e, fwd: fwd, hops: probe.Hops{
		RemoteZtunnel:  ztunnel,
		RemoteGateway:  netip.AddrPortFrom(gwAddr, hbone.Port),
		EchoAuthority:  net.JoinHostPort(echo.Status.PodIP, strconv.Itoa(workload.EchoPort)),
		RemoteHost:     net.JoinHostPort(workload.ProbeHost(probe.EchoRemote), strconv.Itoa(workload.ProbePort)),
		GatewayID:      pki.SPIFFEID(mesh.SystemNamespace, mesh.EastWestGateway),
		EchoID:         pki.SPIFFEID(workload.ProbeNamespace, install.EchoServiceAccount),
		ClientCA:       s.CAs[s.Local.Name],
		Roots:          s.Roots,
		ProbeNamespace: workload.ProbeNamespace,
	}}, nil
}
