package apply

import (
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Decode reads a multi-document YAML or JSON stream (a manifest to apply) into objects, skipping
// empty documents. Unlike the API server's errors, a decoding error names source.
func Decode(r io.Reader, source string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := yaml.NewYAMLOrJSONDecoder(r, 64*1024)
	for {
		obj := &unstructured.Unstructured{}
		if err := d.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", source, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// DecodeFile is Decode of the file at path.
func DecodeFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Decode(f, path)
}
