package dockerhost

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A node container whose delete never ends: on a cgroup v1 host, runc inside the node freezes a
// pod container's cgroup while it applies its settings, and a node killed at that moment leaves
// the cgroup FROZEN. A frozen task cannot die, so the node's init never exits and `docker rm -f`
// fails ("tried to kill container, but did not receive an exit event"). Thawing the node's frozen
// cgroups lets the kill finish. cgroup v2 kills frozen tasks, so only v1's freezer needs this.

// FreezerRoot is cgroup v1's freezer hierarchy.
const FreezerRoot = "/sys/fs/cgroup/freezer"

// ThawFrozen writes THAWED to every frozen (or freezing) freezer cgroup of the containers ids under
// root, for the cgroupfs driver (docker/<id>) and the systemd one (system.slice/docker-<id>.scope),
// and returns the cgroups it thawed.
func ThawFrozen(root string, ids []string) ([]string, error) {
	var thawed []string
	for _, id := range ids {
		for _, dir := range []string{filepath.Join(root, "docker", id), filepath.Join(root, "system.slice", "docker-"+id+".scope")} {
			err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					if os.IsNotExist(err) {
						return fs.SkipDir // the cgroup went meanwhile, or this driver is not in use
					}
					return err
				}
				if d.IsDir() || d.Name() != "freezer.state" {
					return nil
				}
				state, err := os.ReadFile(path)
				if err != nil {
					return nil // the cgroup went meanwhile
				}
				if s := strings.TrimSpace(string(state)); s != "FROZEN" && s != "FREEZING" {
					return nil
				}
				if err := os.WriteFile(path, []byte("THAWED"), 0); err != nil {
					return err
				}
				thawed = append(thawed, filepath.Dir(path))
				return nil
			})
			if err != nil {
				return thawed, err
			}
		}
	}
	return thawed, nil
}
