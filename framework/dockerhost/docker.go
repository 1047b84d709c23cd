// Package dockerhost is what a run does to this host's Docker and kernel, for providers whose
// clusters are containers: the docker CLI behind an interface tests fake, a run's own internal
// network and the subnet it takes, the kernel settings a privileged node may change (recorded
// and put back), and the cgroup v1 freezer a killed node can leave frozen.
package dockerhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// Docker is what a provider asks the docker CLI directly.
type Docker interface {
	// ServerVersion returns the Docker daemon's version, or why it cannot be reached.
	ServerVersion(ctx context.Context) (string, error)
	// ImagePresent reports whether image is in the local image store.
	ImagePresent(ctx context.Context, image string) (bool, error)
	// ImageLabel returns one label of a local image ("" when it has none).
	ImageLabel(ctx context.Context, image, label string) (string, error)
	// SaveImages writes images of the local store into one docker archive at path (docker image
	// save), as `kind load docker-image` does before it imports the archive into each node.
	SaveImages(ctx context.Context, path string, images ...string) error
	// Network returns the IPv4 addressing of a docker network; ErrNoNetwork if it does not exist.
	Network(ctx context.Context, name string) (Network, error)
	// Subnets lists the IPv4 subnets of every docker network.
	Subnets(ctx context.Context) ([]netip.Prefix, error)
	// CreateNetwork creates docker network name: with a subnet and internal, a run's own network
	// (subnet.go); without, as kind's first create would.
	CreateNetwork(ctx context.Context, name string, subnet netip.Prefix, internal bool) error
	// RemoveNetwork removes docker network name.
	RemoveNetwork(ctx context.Context, name string) error
	// LabelledContainers returns the full IDs of the containers carrying label (key=value).
	LabelledContainers(ctx context.Context, label string) ([]string, error)
	// RemoveContainers force-removes containers ids with their anonymous volumes.
	RemoveContainers(ctx context.Context, ids []string) error
	// RunContainer starts image detached as container name on network, with labels, and returns
	// its address there; it publishes no port.
	RunContainer(ctx context.Context, name, image, network string, labels map[string]string) (netip.Addr, error)
}

// Network is a docker network's IPv4 addressing.
type Network struct {
	Subnet netip.Prefix
	// IPRange is where docker allocates container addresses, when narrower than Subnet.
	IPRange netip.Prefix
}

// ErrNoNetwork is returned by Docker.Network for a network that does not exist.
var ErrNoNetwork = errors.New("no such docker network")

// ErrNoDockerCLI is returned when the docker CLI is not on PATH.
var ErrNoDockerCLI = errors.New("the docker CLI is not on PATH")

// NewDocker returns the docker CLI behind the Docker interface.
func NewDocker() Docker { return dockerCLI{} }

type dockerCLI struct{}

func (dockerCLI) run(ctx context.Context, args ...string) ([]byte, error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return nil, ErrNoDockerCLI
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg == "" {
			msg = err.Error()
		}
		return nil, errors.New(msg)
	}
	return stdout.Bytes(), nil
}

func (d dockerCLI) ServerVersion(ctx context.Context) (string, error) {
	out, err := d.run(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func (d dockerCLI) ImagePresent(ctx context.Context, image string) (bool, error) {
	if _, err := d.run(ctx, "image", "inspect", "--format", "{{.Id}}", image); err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "no such image") {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (d dockerCLI) SaveImages(ctx context.Context, path string, images ...string) error {
	_, err := d.run(ctx, append([]string{"image", "save", "-o", path}, images...)...)
	return err
}

func (d dockerCLI) ImageLabel(ctx context.Context, image, label string) (string, error) {
	out, err := d.run(ctx, "image", "inspect", "--format", "{{index .Config.Labels \""+label+"\"}}", image)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(out))
	if v == "<no value>" {
		v = ""
	}
	return v, nil
}

func (d dockerCLI) Subnets(ctx context.Context) ([]netip.Prefix, error) {
	ids, err := d.run(ctx, "network", "ls", "-q")
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, id := range strings.Fields(string(ids)) {
		data, err := d.run(ctx, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", id)
		if err != nil {
			continue // removed meanwhile
		}
		for _, s := range strings.Fields(string(data)) {
			if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
				out = append(out, p.Masked())
			}
		}
	}
	return out, nil
}

func (d dockerCLI) LabelledContainers(ctx context.Context, label string) ([]string, error) {
	out, err := d.run(ctx, "ps", "-aq", "--no-trunc", "--filter", "label="+label)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

func (d dockerCLI) RemoveContainers(ctx context.Context, ids []string) error {
	_, err := d.run(ctx, append([]string{"rm", "-f", "-v"}, ids...)...)
	return err
}

func (d dockerCLI) RunContainer(ctx context.Context, name, image, network string, labels map[string]string) (netip.Addr, error) {
	args := []string{"run", "-d", "--name", name, "--network", network}
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	out, err := d.run(ctx, append(args, image)...)
	if err != nil {
		return netip.Addr{}, err
	}
	id := strings.TrimSpace(string(out))
	out, err = d.run(ctx, "container", "inspect", "--format", fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", network), id)
	if err != nil {
		return netip.Addr{}, err
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(out)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("container %s on network %s: address %q: %w", name, network, strings.TrimSpace(string(out)), err)
	}
	return a, nil
}

func (d dockerCLI) RemoveNetwork(ctx context.Context, name string) error {
	_, err := d.run(ctx, "network", "rm", name)
	return err
}

func (d dockerCLI) Network(ctx context.Context, name string) (Network, error) {
	out, err := d.run(ctx, "network", "inspect", name)
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "not found") || strings.Contains(strings.ToLower(err.Error()), "no such network") {
			return Network{}, ErrNoNetwork
		}
		return Network{}, err
	}
	return parseNetworkInspect(out)
}

// parseNetworkInspect reads the IPv4 IPAM config of `docker network inspect` output.
func parseNetworkInspect(out []byte) (Network, error) {
	var nets []struct {
		Name string
		IPAM struct {
			Config []struct{ Subnet, IPRange string }
		}
	}
	if err := json.Unmarshal(out, &nets); err != nil {
		return Network{}, fmt.Errorf("docker network inspect: %w", err)
	}
	if len(nets) != 1 {
		return Network{}, fmt.Errorf("docker network inspect: want one network, got %d", len(nets))
	}
	for _, c := range nets[0].IPAM.Config {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		n := Network{Subnet: p.Masked()}
		if c.IPRange != "" {
			if r, err := netip.ParsePrefix(c.IPRange); err == nil {
				n.IPRange = r.Masked()
			}
		}
		return n, nil
	}
	return Network{}, fmt.Errorf("docker network %s has no IPv4 subnet", nets[0].Name)
}

// createNetworkArgs are kind's `docker network create` arguments (createNetwork in kind's
// network.go) for an IPv4 network: a bridge with IP masquerading and the MTU of Docker's default
// bridge. kind adds an IPv6 ULA subnet on hosts with IPv6; the framework's clusters are IPv4 only,
// and kind uses an existing network as it is.
func createNetworkArgs(name string, mtu int) []string {
	args := []string{"network", "create", "-d=bridge", "-o", "com.docker.network.bridge.enable_ip_masquerade=true"}
	if mtu > 0 {
		args = append(args, "-o", "com.docker.network.driver.mtu="+strconv.Itoa(mtu))
	}
	return append(args, name)
}

func (d dockerCLI) CreateNetwork(ctx context.Context, name string, subnet netip.Prefix, internal bool) error {
	if internal {
		_, err := d.run(ctx, "network", "create", "-d=bridge", "--internal", "--subnet", subnet.String(),
			"--label", "io.ambientmc.run=true", name)
		return err
	}
	mtu := 0 // as kind: the default bridge's MTU option, if it has one
	if out, err := d.run(ctx, "network", "inspect", "bridge", "-f", `{{ index .Options "com.docker.network.driver.mtu" }}`); err == nil {
		mtu, _ = strconv.Atoi(strings.TrimSpace(string(out)))
	}
	_, err := d.run(ctx, createNetworkArgs(name, mtu)...)
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil // another process created it meanwhile, as kind tolerates
	}
	return err
}
