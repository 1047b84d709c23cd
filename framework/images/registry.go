package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
)

// RegistryPort is the port the registry image listens on, plain HTTP: it runs on a run's own
// internal network, which nothing beyond this host reaches, as Istio's CI runs its kind-registry.
const RegistryPort = 5000

// registryConfig is the registry's configuration (distribution's config.yml): blobs on the
// container's filesystem, gone with it.
const registryConfig = `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: /var/lib/registry
http:
  addr: :5000
`

// ensureRegistry puts the registry image of s into Docker's image store unless it is there: the
// registry binary over no base, with its configuration.
func (b *Builder) ensureRegistry(ctx context.Context, s Set) error {
	if id, err := b.output(ctx, nil, "docker", "image", "inspect", "--format", "{{.Id}}", s.Registry); err == nil && strings.TrimSpace(id) != "" {
		b.logf("%s is current (the registry -kind.registry runs)", s.Registry)
		return nil
	}
	start := time.Now()
	paths, err := b.Cache.Ensure(ctx, bins.Registry)
	if err != nil {
		return err
	}
	cacheDir := filepath.Join(b.Cache.Dir, "images")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(cacheDir, ".registry-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	conf := filepath.Join(stage, "config.yml")
	if err := os.WriteFile(conf, []byte(registryConfig), 0o644); err != nil {
		return err
	}
	const confPath = "/etc/distribution/config.yml"
	c := component{refs: []string{s.Registry}, files: []file{{paths[bins.Registry], "/bin/registry"}, {conf, confPath}},
		entrypoint: []string{"/bin/registry", "serve", confPath}, dirs: []dir{{"/var/lib/registry", 0o755}, {"/tmp", 0o1777}}}
	archive := filepath.Join(stage, "registry.tar")
	if err := writeArchive(archive, "", []component{c}); err != nil {
		return err
	}
	if err := b.run(ctx, "docker", "image", "load", "-i", archive); err != nil {
		return err
	}
	b.logf("built %s in %s (%s): the registry -kind.registry runs beside the nodes", s.Registry, time.Since(start).Round(time.Second), sizeOf(archive))
	// The registry images of other keys are left unused.
	tags, _ := b.output(ctx, nil, "docker", "image", "ls", RegistryRepo, "--format", "{{.Repository}}:{{.Tag}}")
	for _, t := range strings.Fields(tags) {
		if t != s.Registry {
			_ = b.run(ctx, "docker", "image", "rm", t)
		}
	}
	return nil
}
