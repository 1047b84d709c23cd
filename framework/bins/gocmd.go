package bins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// moduleSource returns the module cache directory of module (optionally module@version) as seen
// from the module in dir, downloading it if needed.
func moduleSource(ctx context.Context, dir, module string) (string, error) {
	out, err := goCmd(ctx, dir, "mod", "download", "-json", module)
	var info struct{ Dir, Error string }
	_ = json.Unmarshal([]byte(out), &info)
	if err != nil || info.Dir == "" {
		return "", fmt.Errorf("locating %s (go mod download in %s): %v %s %s", module, dir, err, info.Error, strings.TrimSpace(out))
	}
	return info.Dir, nil
}

// goCmd runs the go command in dir with GOWORK off (a wrapper must be its own main module) and
// returns stdout and stderr together.
func goCmd(ctx context.Context, dir string, args ...string) (string, error) {
	goBin, err := goTool()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

func goTool() (string, error) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err == nil {
		return goBin, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("needs the Go toolchain on PATH: %w", err)
	}
	return goBin, nil
}

func goEnv() []string { return append(os.Environ(), "GOWORK=off") }

func goEnvValue(key string) string {
	out, err := goCmd(context.Background(), os.TempDir(), "env", key)
	if err != nil {
		return os.Getenv(key)
	}
	return strings.TrimSpace(out)
}

// ModuleSource returns the module cache directory of a module the main module requires (e.g.
// istio.io/istio, for files it ships such as MetalLB's manifest), downloading it if needed.
func (c *Cache) ModuleSource(ctx context.Context, module string) (string, error) {
	return moduleSource(ctx, c.SrcRoot, module)
}
