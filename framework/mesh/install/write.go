package install

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// fileName is the YAML file of the i-th component (0-based): 01-gateway-api-crds.yaml, ...
func fileName(i int, component string) string { return fmt.Sprintf("%02d-%s.yaml", i+1, component) }

// WriteDir writes one multi-document YAML file per component into dir (created if needed), named
// as FileNames says. A file holding a Secret (base: cacerts, CA key included) is written 0600.
func (m *Manifests) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, c := range m.Components {
		data, err := c.YAML()
		if err != nil {
			return fmt.Errorf("install: cluster %s: %s: %w", m.Cluster, c.Name, err)
		}
		mode := os.FileMode(0o644)
		if c.hasSecret() {
			mode = 0o600
		}
		path := filepath.Join(dir, fileName(i, c.Name))
		if err := os.WriteFile(path, data, mode); err != nil {
			return err
		}
		if err := os.Chmod(path, mode); err != nil { // WriteFile keeps an existing file's mode
			return err
		}
	}
	return nil
}

// FileNames are the files WriteDir writes, in apply order: 01-gateway-api-crds.yaml, ...
func (m *Manifests) FileNames() []string {
	out := make([]string, len(m.Components))
	for i, c := range m.Components {
		out[i] = fileName(i, c.Name)
	}
	return out
}

// YAML is the component as one multi-document YAML stream, in apply order.
func (c *Component) YAML() ([]byte, error) {
	var b strings.Builder
	for _, o := range c.Objects {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return []byte(b.String()), nil
}

func (c *Component) hasSecret() bool {
	for _, o := range c.Objects {
		if o.GetKind() == "Secret" {
			return true
		}
	}
	return false
}
