package images

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ambientmc/ambientmc/framework/bins"
)

// kindBase is where kind's node files live in the sigs.k8s.io/kind module.
const kindBase = "images/base/files"

// stage lays out, under dir, every file the node image adds to the root filesystem.
func (b *Builder) stage(ctx context.Context, dir string, s Set, paths map[bins.Binary]string) error {
	kind, err := b.Cache.ModuleSource(ctx, "sigs.k8s.io/kind")
	if err != nil {
		return err
	}
	src := filepath.Join(kind, kindBase)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if strings.HasPrefix(rel, "LICENSES") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if data, err = patchKindFile(rel, data); err != nil {
			return fmt.Errorf("sigs.k8s.io/kind %s: %w", rel, err)
		}
		return writeFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		return err
	}
	put := func(bin bins.Binary, dst string) error {
		data, err := os.ReadFile(paths[bin])
		if err != nil {
			return err
		}
		return writeFile(filepath.Join(dir, dst), data, 0o755)
	}
	for bin, dst := range map[bins.Binary]string{
		bins.Containerd: "usr/local/bin/containerd", bins.ContainerdShim: "usr/local/bin/containerd-shim-runc-v2",
		bins.Ctr: "usr/local/bin/ctr", bins.Crictl: "usr/local/bin/crictl",
		bins.Kubelet: "usr/bin/kubelet", bins.Kubeadm: "usr/bin/kubeadm", bins.Kubectl: "usr/bin/kubectl",
		bins.CNIBridge: "opt/cni/bin/bridge", bins.CNIHostLocal: "opt/cni/bin/host-local",
		bins.CNILoopback: "opt/cni/bin/loopback", bins.CNIPortmap: "opt/cni/bin/portmap",
	} {
		if err := put(bin, dst); err != nil {
			return err
		}
	}
	for f, dst := range map[string]string{"files/node-guard.sh": "usr/local/bin/ambientmc-node-guard", "files/build-node.sh": "tmp/build-node.sh"} {
		data, err := files.ReadFile(f)
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, dst), data, 0o755); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dir, "kind", "version"), []byte(s.Kubernetes+"\n"), 0o644)
}

// patchKindFile changes kind's node files where this project's hosts need it, failing when kind's
// text has moved (a new kind version must be looked at again):
//   - the entrypoint applies the egress guard before anything else, asks no DNS server for
//     host.docker.internal, and where a network gives no default route points the
//     node's DNS at its own address (where the guard refuses it) instead of at nothing;
//   - containerd never lowers OOM scores (that needs CAP_SYS_RESOURCE, which these hosts' nodes
//     lack; every pod sandbox fails without it).
func patchKindFile(rel string, data []byte) ([]byte, error) {
	type edit struct{ old, new string }
	var edits []edit
	switch rel {
	case "usr/local/bin/entrypoint":
		edits = []edit{
			{"# validate state\nvalidate_userns\n", "# ambientmc: nothing leaves the node, from the first command on\n/usr/local/bin/ambientmc-node-guard\n\n# validate state\nvalidate_userns\n"},
			{`docker_host_ip="$( (head -n1 <(timeout 5 getent ahostsv4 'host.docker.internal') | cut -d' ' -f1) || true)"`, `docker_host_ip="" # ambientmc: no lookup of host.docker.internal`},
			{`    docker_host_ip=$(ip -4 route show default | cut -d' ' -f3)` + "\n", `    docker_host_ip=$(ip -4 route show default | cut -d' ' -f3)` + "\n" +
				`    [[ -n "${docker_host_ip}" ]] || docker_host_ip=$(ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1 | head -n1)` + "\n"},
		}
	case "etc/containerd/config.toml":
		edits = []edit{{"restrict_oom_score_adj = false", "restrict_oom_score_adj = true"}}
	}
	s := string(data)
	for _, e := range edits {
		if strings.Count(s, e.old) != 1 {
			return nil, fmt.Errorf("expected text not found once: %q", e.old)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	return []byte(s), nil
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, mode)
}
