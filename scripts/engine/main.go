// Command engine makes a Docker engine answer for the kind provider (`make engine`). It uses one
// that answers already; otherwise, on Linux as root, it installs the distribution's engine if
// dockerd is missing, starts dockerd with its log in the cache directory, registers the capwrap
// runtime only where the host's capability bounding set lacks a capability privileged containers
// ask for, waits until the engine answers and says what it did. `-stop` stops an engine this
// command started (and nothing else).
//
//	go run ./scripts/engine          # make engine
//	go run ./scripts/engine -stop    # make engine-stop
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/scripts/engine/caps"
)

// runtimeName is the name capwrap is registered under in dockerd.
const runtimeName = "ambientmc-runc"

func main() {
	stop := flag.Bool("stop", false, "stop the engine this command started (no-op if it started none)")
	wait := flag.Duration("wait", 90*time.Second, "how long the engine may take to answer after dockerd starts")
	flag.Parse()
	dir, err := engineDir()
	if err == nil {
		if *stop {
			err = stopEngine(dir)
		} else {
			err = ensure(dir, *wait)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(1)
	}
}

func say(f string, a ...any) { fmt.Printf("engine: "+f+"\n", a...) }

// engineDir holds dockerd's log, pid file, config and the runtime wrapper: the ambientmc cache.
func engineDir() (string, error) {
	c, err := bins.Default()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(c.Dir, "engine")
	return dir, os.MkdirAll(dir, 0o755)
}

// serverVersion is the engine's version, or why the docker CLI cannot reach one.
func serverVersion() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return "", errors.New(lines[len(lines)-1])
	}
	return strings.TrimSpace(string(out)), nil
}

func ensure(dir string, wait time.Duration) error {
	if v, err := serverVersion(); err == nil {
		say("Docker %s answers; using it (nothing installed or started)", v)
		return nil
	} else if _, lerr := exec.LookPath("docker"); lerr == nil {
		say("no engine answers (%v)", err)
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return errors.New("no Docker engine answers, and only root on Linux may have make engine start one: start Docker yourself (Docker Desktop, or sudo systemctl start docker) or run make engine as root")
	}
	if err := install(); err != nil {
		return err
	}
	cfg, wrapped, err := daemonConfig(dir)
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "dockerd.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	pidPath := filepath.Join(dir, "dockerd.pid")
	cmd := exec.Command("dockerd", "--config-file", cfg, "--pidfile", pidPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: dockerd outlives make and the shell that ran it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting dockerd: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "started"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		if v, err := serverVersion(); err == nil {
			how := "with runc as its runtime"
			if wrapped != "" {
				how = "with the capwrap runtime (" + wrapped + ")"
			}
			say("started dockerd %s (pid %d) in %.1fs %s; log %s; make engine-stop stops it", v, cmd.Process.Pid, time.Since(start).Seconds(), how, logPath)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("dockerd exited (%v) before it answered; its log: %s\n%s", err, logPath, tail(logPath, 15))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Since(start) > wait {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("dockerd did not answer within %s; its log: %s\n%s", wait, logPath, tail(logPath, 15))
		}
	}
}

// install installs the distribution's engine when dockerd is missing.
func install() error {
	if _, err := exec.LookPath("dockerd"); err == nil {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("dockerd is not installed and this host has no apt-get: install Docker (https://docs.docker.com/engine/install/)")
	}
	start := time.Now()
	say("dockerd is not installed: installing the distribution's docker.io")
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "docker.io"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	say("installed docker.io in %.0fs", time.Since(start).Seconds())
	return nil
}

// daemonConfig writes dockerd's configuration: the host's /etc/docker/daemon.json, plus the
// capwrap runtime as the default where the bounding set lacks capabilities. It returns the file
// and, when the wrapper is registered, the capabilities it removes.
func daemonConfig(dir string) (path, wrapped string, err error) {
	cfg := map[string]any{}
	if data, err := os.ReadFile("/etc/docker/daemon.json"); err == nil {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return "", "", fmt.Errorf("/etc/docker/daemon.json: %w", err)
		}
	}
	bounding, err := caps.Bounding()
	if err != nil {
		return "", "", err
	}
	if missing := caps.Missing(bounding, caps.LastCap()); len(missing) > 0 {
		wrapper := filepath.Join(dir, "capwrap")
		root, err := bins.SourceRoot()
		if err != nil {
			return "", "", err
		}
		build := exec.Command("go", "build", "-o", wrapper, "./scripts/engine/capwrap")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("building the runtime wrapper: %v\n%s", err, out)
		}
		rts, _ := cfg["runtimes"].(map[string]any)
		if rts == nil {
			rts = map[string]any{}
		}
		rts[runtimeName] = map[string]any{"path": wrapper}
		cfg["runtimes"] = rts
		cfg["default-runtime"] = runtimeName
		wrapped = "privileged containers lose " + strings.Join(missing, ", ") + ", outside this host's capability bounding set"
		say("the capability bounding set lacks %s: registering %s as dockerd's default runtime", strings.Join(missing, ", "), wrapper)
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(dir, "daemon.json")
	return path, wrapped, os.WriteFile(path, data, 0o644)
}

// stopEngine stops the dockerd this command started, waiting for it to exit.
func stopEngine(dir string) error {
	marker := filepath.Join(dir, "started")
	data, err := os.ReadFile(marker)
	if errors.Is(err, os.ErrNotExist) {
		say("no engine was started by make engine; nothing to stop")
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("%s: %w", marker, err)
	}
	defer os.Remove(marker)
	if !isDockerd(pid) {
		say("dockerd (pid %d) is no longer running", pid)
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(60 * time.Second)
	for isDockerd(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("dockerd (pid %d) did not stop within 60s: killed", pid)
		}
		time.Sleep(200 * time.Millisecond)
	}
	say("stopped dockerd (pid %d)", pid)
	return nil
}

func isDockerd(pid int) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(comm)) == "dockerd"
}

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
