package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Load reads a topology file, detects its format, parses and validates it. A relative path not
// found from the working directory is tried from the module root: go test runs a suite in its
// package's directory, so -topology=topology/examples/x.yaml typed at the repository's root
// would otherwise name nothing.
func Load(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(path) {
		if root := moduleRoot(); root != "" {
			if d, rerr := os.ReadFile(filepath.Join(root, path)); rerr == nil {
				data, err, path = d, nil, filepath.Join(root, path)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("topology %s: %w; check the path given to -topology (a relative one is read from the working directory, then from the module root)", path, err)
	}
	return Parse(data, path)
}

// moduleRoot is the nearest directory at or above the working directory holding a go.mod; ""
// when there is none.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Parse reads a topology in either format and validates it; source names it in errors.
// A top-level JSON array is Istio's prow topology; anything else is ambientmc YAML or JSON.
func Parse(data []byte, source string) (*Topology, error) {
	var (
		t    *Topology
		errs []error
	)
	// Detect on trimmed bytes but parse the original, so line numbers match the file.
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '[' {
		t, errs = parseIstio(data, source)
	} else {
		t, errs = parseAmbient(data, source)
	}
	if t == nil {
		return nil, errors.Join(errs...)
	}
	t.normalize()
	if err := t.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

// ambientFile is ambientmc's own format.
type ambientFile struct {
	Clusters []json.RawMessage `json:"clusters"`
}

type ambientCluster struct {
	Name       string `json:"name"`
	Network    string `json:"network,omitempty"`
	Primary    string `json:"primary,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

func parseAmbient(data []byte, source string) (*Topology, []error) {
	t := &Topology{Source: source, format: formatAmbient}
	if len(bytes.TrimSpace(data)) == 0 {
		return t, nil // Validate reports "no clusters"
	}
	// Strict conversion rejects duplicate keys; its errors carry the YAML line.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, []error{t.errorf("", "fix the YAML syntax at the line shown", "invalid YAML: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return t, nil // only comments
	}
	var file ambientFile
	if err := decodeStrict(js, &file); err != nil {
		return nil, []error{t.decodeError("", err, "the top level holds only clusters: a list of {name, network, primary, kubeconfig}")}
	}
	var errs []error
	for i, raw := range file.Clusters {
		var c ambientCluster
		if err := decodeStrict(raw, &c); err != nil {
			errs = append(errs, t.decodeError(t.format.elem(i), err, "a cluster has only name, network, primary and kubeconfig"))
			continue
		}
		t.Clusters = append(t.Clusters, Cluster{Name: c.Name, Network: c.Network, Primary: c.Primary, Kubeconfig: c.Kubeconfig})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

// istioCluster is one entry of Istio's prow topology (istio.io/istio pkg/test/framework/components/cluster.Config
// plus the fields prow's scripts read). Subnets, proxy settings and other meta keys are accepted but unused.
type istioCluster struct {
	Kind               string         `json:"kind,omitempty"`
	ClusterName        string         `json:"clusterName,omitempty"`
	PodSubnet          string         `json:"podSubnet,omitempty"`
	SvcSubnet          string         `json:"svcSubnet,omitempty"`
	Network            string         `json:"network,omitempty"`
	PrimaryClusterName string         `json:"primaryClusterName,omitempty"`
	ConfigClusterName  string         `json:"configClusterName,omitempty"`
	Meta               map[string]any `json:"meta,omitempty"`
	HTTPProxy          string         `json:"httpProxy,omitempty"`
	ProxyKubectlOnly   bool           `json:"proxyKubectlOnly,omitempty"`
}

func parseIstio(data []byte, source string) (*Topology, []error) {
	t := &Topology{Source: source, format: formatIstio}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, []error{t.decodeError("", jsonPosition(data, err), "")}
	}
	var errs []error
	for i, raw := range raws {
		var c istioCluster
		if err := decodeStrict(raw, &c); err != nil {
			errs = append(errs, t.decodeError(t.format.elem(i), err,
				"a cluster has only kind, clusterName, podSubnet, svcSubnet, network, primaryClusterName, configClusterName, meta, httpProxy and proxyKubectlOnly"))
			continue
		}
		if c.Kind != "" && c.Kind != "Kubernetes" {
			errs = append(errs, t.errorf(t.format.elem(i)+".kind", "set kind to Kubernetes or remove the entry",
				"kind %q is not supported; ambientmc builds Kubernetes clusters only", c.Kind))
		}
		var kubeconfig string
		if v, ok := c.Meta["kubeconfig"]; ok {
			s, isString := v.(string)
			if !isString {
				errs = append(errs, t.errorf(t.format.path(i, fieldKubeconfig), "set it to the kubeconfig file's path as a string",
					"kubeconfig is %T, want a string", v))
			}
			kubeconfig = s
		}
		t.Clusters = append(t.Clusters, Cluster{
			Name:       c.ClusterName,
			Network:    c.Network,
			Primary:    c.PrimaryClusterName,
			Config:     c.ConfigClusterName,
			Kubeconfig: kubeconfig,
		})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

// decodeStrict decodes a JSON object into the struct v points to, refusing keys it lacks.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// encoding/json matches keys case-insensitively: "Name" would fill name, and of name and
	// Name the last would silently win. Keys are spelled as the format spells them.
	var keys map[string]json.RawMessage // nil for null
	if err := json.Unmarshal(data, &keys); err != nil {
		return err
	}
	t := reflect.TypeOf(v).Elem()
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !hasKey(t, k) {
			return fmt.Errorf("json: unknown field %q", k)
		}
	}
	return nil
}

// hasKey says whether struct type t has a field whose json key is exactly k.
func hasKey(t reflect.Type, k string) bool {
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == k {
			return true
		}
	}
	return false
}

// decodeError turns an encoding/json error into an Error at path; fix explains the allowed fields.
func (t *Topology) decodeError(path string, err error, fix string) *Error {
	var (
		typeErr *json.UnmarshalTypeError
		posErr  *positionError
	)
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		if b == "" {
			return a
		}
		return a + "." + b
	}
	switch {
	case errors.As(err, &posErr):
		return t.errorf(path, "fix the JSON syntax at the line shown", "invalid JSON at line %d, column %d: %s", posErr.line, posErr.col, posErr.msg)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" && path == "" {
			return t.errorf("", "write an object with a clusters list (ambientmc) or a JSON array of clusters (Istio)",
				"not a topology: the top level is %s", article(typeErr.Value))
		}
		want := kindName(typeErr.Type)
		fix := "write it as " + want
		if want == "a string" {
			fix += "; in YAML, quote values such as yes, no, on, off, y, n or numbers"
		}
		return t.errorf(join(path, typeErr.Field), fix, "got %s, want %s", article(typeErr.Value), want)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return t.errorf(path, fix, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return t.errorf(path, fix, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// positionError is a JSON syntax error with its line and column.
type positionError struct {
	line, col int
	msg       string
}

func (e *positionError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.line, e.col, e.msg)
}

// jsonPosition adds the line and column to a JSON syntax error, which encoding/json reports as a byte offset.
func jsonPosition(data []byte, err error) error {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return err
	}
	// Offset counts the bytes read, so the offending byte is the one before it.
	off := max(min(int(syn.Offset), len(data))-1, 0)
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := off - bytes.LastIndexByte(before, '\n')
	return &positionError{line: line, col: col, msg: strings.TrimPrefix(syn.Error(), "json: ")}
}

// kindName says what JSON value a Go type expects, in words a file author knows.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	default:
		return "a " + t.Kind().String()
	}
}

func article(jsonKind string) string {
	if strings.HasPrefix(jsonKind, "a") || strings.HasPrefix(jsonKind, "o") {
		return "an " + jsonKind
	}
	return "a " + jsonKind
}
