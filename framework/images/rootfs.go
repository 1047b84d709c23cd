package images

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// rootfsPackages are the distribution's packages of the node's root filesystem (kind's base
// image's list, less what a kind run here does not use: fuse-overlayfs, nfs, iscsi, curl), with
// runc from the distribution. The component images share the same tree as their base layer.
var rootfsPackages = []string{
	"systemd", "systemd-sysv", "dbus", "runc", "iptables", "nftables", "iproute2", "conntrack", "ethtool",
	"socat", "util-linux", "mount", "kmod", "ca-certificates", "procps", "libseccomp2", "pigz", "jq", "bash",
	"e2fsprogs", "libc-bin",
}

// aptSource is the host's Debian mirror and release, which debootstrap reads from.
type aptSource struct{ Mirror, Suite string }

// hostAptSource reads the first Debian source of the host (deb822 or one-line format) and the
// release codename from /etc/os-release.
func hostAptSource() (aptSource, error) {
	var s aptSource
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VERSION_CODENAME="); ok {
				s.Suite = strings.Trim(v, `"`)
			}
		}
	}
	paths, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, p := range append(paths, "/etc/apt/sources.list") {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if v, ok := strings.CutPrefix(line, "URIs:"); ok && s.Mirror == "" {
				if u := strings.Fields(v); len(u) > 0 && !strings.Contains(u[0], "security") {
					s.Mirror = u[0]
				}
			}
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "deb" && s.Mirror == "" && !strings.Contains(f[1], "security") {
				s.Mirror = f[1]
			}
		}
		f.Close()
	}
	if s.Mirror == "" || s.Suite == "" {
		return s, errors.New("cannot read this host's Debian mirror and release (/etc/apt/sources.list*, /etc/os-release): the node image is built with debootstrap from them")
	}
	return s, nil
}

// rootfsTar returns a tar of the node's root filesystem, built once per package list, mirror and
// release into dir.
func (b *Builder) rootfsTar(ctx context.Context, dir string) (string, error) {
	src, err := hostAptSource()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(src.Mirror + " " + src.Suite + " " + strings.Join(rootfsPackages, ",")))
	out := filepath.Join(dir, "rootfs-"+hex.EncodeToString(h[:])[:12]+".tar")
	if _, err := os.Stat(out); err == nil {
		b.logf("root filesystem: cached %s", out)
		return out, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		if err := b.aptInstall(ctx, "debootstrap"); err != nil {
			return "", err
		}
	}
	tree, err := os.MkdirTemp(dir, ".rootfs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tree)
	start := time.Now()
	b.logf("root filesystem: debootstrap %s from %s (%d packages; about a minute)", src.Suite, src.Mirror, len(rootfsPackages))
	if err := b.run(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(rootfsPackages, ","), src.Suite, tree, src.Mirror); err != nil {
		return "", fmt.Errorf("debootstrap: %w", err)
	}
	// The APT lists and caches are of no use in a node.
	for _, p := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		_ = os.RemoveAll(filepath.Join(tree, p))
	}
	tmp := out + ".tmp"
	if err := b.run(ctx, "tar", "--numeric-owner", "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "-C", tree, "-cf", tmp, "."); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	b.logf("root filesystem: built in %s (%s)", time.Since(start).Round(time.Second), sizeOf(out))
	return out, nil
}

func (b *Builder) aptInstall(ctx context.Context, pkgs ...string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is not installed: install it (apt-get install %s)", strings.Join(pkgs, " "), strings.Join(pkgs, " "))
	}
	b.logf("installing %s from the distribution's packages", strings.Join(pkgs, " "))
	if err := b.run(ctx, "apt-get", "update", "-qq"); err != nil {
		return err
	}
	return b.run(ctx, "apt-get", append([]string{"install", "-y", "-qq"}, pkgs...)...)
}

func sizeOf(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.0f MB", float64(st.Size())/1e6)
}
