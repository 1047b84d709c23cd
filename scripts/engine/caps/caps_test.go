package caps

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// This project's machines print CapBnd 000001fffeffffff: everything up to bit 40 but bit 24.
func TestParseFindsTheMissingCapability(t *testing.T) {
	s, err := Parse("000001fffeffffff", 40)
	require.NoError(t, err)
	require.Equal(t, []string{"CAP_SYS_RESOURCE"}, Missing(s, 40))
	full, err := Parse("000001ffffffffff", 40)
	require.NoError(t, err)
	require.Empty(t, Missing(full, 40))
}

func TestSpecFiles(t *testing.T) {
	got := SpecFiles([]string{"--root", "/r", "--log", "l.json", "create", "--bundle", "/b1", "--pid-file", "p", "id"})
	require.Equal(t, []string{"/b1/config.json"}, got)
	got = SpecFiles([]string{"exec", "--process", "/tmp/p.json", "-d", "id"})
	require.Equal(t, []string{"/tmp/p.json"}, got)
	got = SpecFiles([]string{"create", "--bundle=/b2", "id"})
	require.Equal(t, []string{"/b2/config.json"}, got)
	require.Empty(t, SpecFiles([]string{"delete", "--force", "id"}))
}

func TestStripKeepsOtherFields(t *testing.T) {
	keep := Set{"CAP_CHOWN": true, "CAP_NET_ADMIN": true}
	bundle := filepath.Join(t.TempDir(), "config.json")
	spec := `{"ociVersion":"1.0.2","process":{"args":["sh"],"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_NET_ADMIN"],"effective":["CAP_SYS_RESOURCE"]}},"root":{"path":"rootfs"}}`
	require.NoError(t, os.WriteFile(bundle, []byte(spec), 0o640))
	require.NoError(t, StripFile(bundle, keep))
	var got struct {
		OCIVersion string `json:"ociVersion"`
		Process    struct {
			Args         []string
			Capabilities map[string][]string
		}
		Root struct{ Path string }
	}
	data, _ := os.ReadFile(bundle)
	require.NoError(t, json.Unmarshal(data, &got))
	require.Equal(t, "1.0.2", got.OCIVersion)
	require.Equal(t, []string{"sh"}, got.Process.Args)
	require.Equal(t, "rootfs", got.Root.Path)
	require.Equal(t, []string{"CAP_CHOWN", "CAP_NET_ADMIN"}, got.Process.Capabilities["bounding"])
	require.Empty(t, got.Process.Capabilities["effective"])
	st, _ := os.Stat(bundle)
	require.Equal(t, os.FileMode(0o640), st.Mode().Perm())

	// A process file (runc exec --process) has the capabilities at its top level.
	proc := filepath.Join(t.TempDir(), "process.json")
	require.NoError(t, os.WriteFile(proc, []byte(`{"args":["ls"],"capabilities":{"permitted":["CAP_SYS_RESOURCE","CAP_CHOWN"]}}`), 0o600))
	require.NoError(t, StripFile(proc, keep))
	data, _ = os.ReadFile(proc)
	require.JSONEq(t, `{"args":["ls"],"capabilities":{"permitted":["CAP_CHOWN"]}}`, string(data))
}
