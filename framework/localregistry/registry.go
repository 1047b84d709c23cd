// Package localregistry is a registry container on a run's own Docker network, as Istio's CI runs
// its kind-registry beside its kind clusters: started from the image make images builds
// (distribution's registry), the images a run takes from Docker's image store pushed into it, and
// the containerd mirror each node gets for every registry host those images name. It publishes
// no port: this host reaches it at its address on the run's network, as it reaches the nodes, and
// nothing beyond this host reaches it at all.
package localregistry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/kindnode"
)

// Label marks a registry container with the network it serves: what removes that network removes
// the containers carrying it first.
const Label = "io.ambientmc.registry-network"

// readyWithin bounds the wait for a started registry to answer.
const readyWithin = 30 * time.Second

// Registry is a started registry container.
type Registry struct {
	// Addr is where it listens on the run's network (plain HTTP).
	Addr netip.AddrPort
}

// Start runs image as a registry container on network and waits until it answers.
func Start(ctx context.Context, d dockerhost.Docker, image, network string) (*Registry, error) {
	a, err := d.RunContainer(ctx, network+"-registry", image, network, map[string]string{Label: network})
	if err != nil {
		return nil, fmt.Errorf("starting the registry %s on network %s: %w", image, network, err)
	}
	r := &Registry{Addr: netip.AddrPortFrom(a, images.RegistryPort)}
	ctx, cancel := context.WithTimeout(ctx, readyWithin)
	defer cancel()
	for {
		err = r.ping(ctx)
		if err == nil {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the registry at %s did not answer within %s: %w", r.Addr, readyWithin, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// transport reaches the registry directly: no proxy from the environment may carry a run's
// traffic elsewhere.
var transport = &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}

func (r *Registry) ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr.String()+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := transport.RoundTrip(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v2/: %s", resp.Status)
	}
	return nil
}

// Push pushes refs from the docker archive at path (docker image save) into the registry, each
// under its own repository and tag, its registry host left out: every node's mirror for that
// host (MirrorScript) serves it.
func (r *Registry) Push(ctx context.Context, path string, refs []string) error {
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		img, err := tarball.ImageFromPath(path, &tag)
		if err != nil {
			return fmt.Errorf("image %s in %s: %w", ref, path, err)
		}
		dst, err := r.Tag(ref)
		if err != nil {
			return err
		}
		if err := remote.Write(dst, img, remote.WithContext(ctx), remote.WithTransport(transport)); err != nil {
			return fmt.Errorf("pushing %s to the registry at %s: %w", ref, r.Addr, err)
		}
	}
	return nil
}

// Tag is where ref is in the registry: its repository and tag, under the registry's address.
func (r *Registry) Tag(ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image %s: %w", ref, err)
	}
	return name.NewTag(fmt.Sprintf("%s/%s:%s", r.Addr, tag.RepositoryStr(), tag.TagStr()), name.Insecure)
}

// Hosts are the registry hosts refs name, each once, as containerd names them (docker.io for
// Docker Hub's images).
func Hosts(refs []string) ([]string, error) {
	var out []string
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", ref, err)
		}
		h := tag.RegistryStr()
		if h == name.DefaultRegistry {
			h = "docker.io"
		}
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out, nil
}

// Mirror points every node's containerd at the registry for the hosts of refs (MirrorScript): the
// nodes pull those images when a pod needs them.
func (r *Registry) Mirror(ns []nodes.Node, refs []string) error {
	hosts, err := Hosts(refs)
	if err != nil || len(hosts) == 0 {
		return err
	}
	for _, n := range ns {
		if _, err := kindnode.Output(n, r.MirrorScript(hosts)); err != nil {
			return fmt.Errorf("the registry mirror for %s: %w", strings.Join(hosts, ", "), err)
		}
	}
	return nil
}

// MirrorScript is the shell script that makes a node's containerd (its registry configuration in
// /etc/containerd/certs.d: kindconfig.Node.Registry) pull every image of hosts from
// the registry, and from nowhere else (the registry is each host's server too).
func (r *Registry) MirrorScript(hosts []string) string {
	var s []string
	for _, h := range hosts {
		dir := "/etc/containerd/certs.d/" + h
		s = append(s, fmt.Sprintf("mkdir -p %s && printf 'server = \"http://%s\"\\n[host.\"http://%s\"]\\n  capabilities = [\"pull\", \"resolve\"]\\n' > %s/hosts.toml",
			dir, r.Addr, r.Addr, dir))
	}
	return strings.Join(s, "\n")
}
