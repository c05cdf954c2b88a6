/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package mpsdaemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vgpu-dra/vgpu-dra-driver/internal/testenv"
)

// NVIDIA's real control daemon: Debian's non-free nvidia-cuda-mps of one
// driver version, fetched with apt into a private directory (its own
// sources list, lists and cache; the machine's apt state is never
// touched) and unpacked, never installed. It starts without a GPU.
const (
	realSuite   = "trixie" // nvidia-cuda-mps 550.x
	realPackage = "nvidia-cuda-mps"
	realKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	// realFetchTimeout bounds each network step.
	realFetchTimeout = 5 * time.Minute
)

// realControl returns the path of NVIDIA's nvidia-cuda-mps-control:
// $VGPU_MPS_CONTROL, or the package fetched once into $VGPU_MPS_DIR
// (default: the user's cache directory). Where it cannot be had the test
// is skipped, except in CI (CI set), where it fails.
func realControl(t *testing.T) string {
	if p := os.Getenv("VGPU_MPS_CONTROL"); p != "" {
		return p
	}
	unavailable := func(format string, args ...any) {
		t.Helper()
		testenv.Unavailable(t, "NVIDIA's control daemon: "+format, args...)
	}
	dir := os.Getenv("VGPU_MPS_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		require.NoError(t, err)
		dir = filepath.Join(cache, "vgpu-dra", realPackage+"-"+realSuite)
	}
	// Unpacked into a directory renamed into place: there, it is whole.
	control := filepath.Join(dir, "root", "usr", "bin", daemonName)
	if _, err := os.Stat(control); err == nil {
		return control
	}
	if os.Geteuid() != 0 {
		unavailable("fetching %s with apt-get needs root", realPackage)
	}
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable("needs %s (a Debian-based machine)", tool)
		}
	}
	if _, err := os.Stat(realKeyring); err != nil {
		unavailable("needs %s to verify Debian's archive", realKeyring)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	// Test binaries of several packages may fetch at once.
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer func() { _ = lock.Close() }()
	require.NoError(t, unix.Flock(int(lock.Fd()), unix.LOCK_EX))
	if _, err := os.Stat(control); err == nil {
		return control
	}
	if err := fetchReal(t, dir); err != nil {
		unavailable("cannot fetch %s from Debian %s: %v", realPackage, realSuite, err)
	}
	return control
}

func fetchReal(t *testing.T, dir string) error {
	mirror, err := exec.Command("../../../vgpu-core/test/lib/apt_mirror.sh").Output()
	if err != nil {
		return err
	}
	apt, debs, root := filepath.Join(dir, "apt"), filepath.Join(dir, "debs"), filepath.Join(dir, "root.new")
	for _, d := range []string{apt, debs, root, filepath.Join(dir, "root")} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	for _, d := range []string{filepath.Join(apt, "lists", "partial"), filepath.Join(apt, "archives", "partial"), filepath.Join(apt, "sources.d"), debs, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sources := "deb [signed-by=" + realKeyring + "] " + strings.TrimSpace(string(mirror)) + " " + realSuite + " non-free\n"
	if err := os.WriteFile(filepath.Join(apt, "sources.list"), []byte(sources), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(apt, "status"), nil, 0o644); err != nil {
		return err
	}
	opts := []string{"-qq",
		"-o", "Dir::Etc::SourceList=" + filepath.Join(apt, "sources.list"), "-o", "Dir::Etc::SourceParts=" + filepath.Join(apt, "sources.d"),
		"-o", "Dir::State::Lists=" + filepath.Join(apt, "lists"), "-o", "Dir::Cache=" + apt, "-o", "Dir::State::Status=" + filepath.Join(apt, "status"),
		"-o", "APT::Sandbox::User=root", "-o", "Acquire::Retries=1"}
	for _, args := range [][]string{append(opts, "update"), append(opts, "download", realPackage)} {
		ctx, cancel := context.WithTimeout(context.Background(), realFetchTimeout)
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Dir = debs
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return &fetchError{args: args[len(opts):], out: string(out), err: err}
		}
	}
	found, err := filepath.Glob(filepath.Join(debs, realPackage+"_*.deb"))
	if err != nil || len(found) != 1 {
		return &fetchError{args: []string{"download"}, out: strings.Join(found, " "), err: err}
	}
	t.Logf("unpacking %s", filepath.Base(found[0]))
	if out, err := exec.Command("dpkg-deb", "-x", found[0], root).CombinedOutput(); err != nil {
		return &fetchError{args: []string{"dpkg-deb", "-x"}, out: string(out), err: err}
	}
	return os.Rename(root, filepath.Join(dir, "root"))
}

type fetchError struct {
	args []string
	out  string
	err  error
}

func (e *fetchError) Error() string {
	return "apt-get " + strings.Join(e.args, " ") + ": " + strings.TrimSpace(e.out) + ": " + errString(e.err)
}

func errString(err error) string {
	if err == nil {
		return "unexpected result"
	}
	return err.Error()
}

// TestLifecycleOnRealControl runs the supervisor's whole lifecycle against
// NVIDIA's daemon: start, set and read the defaults, a value it ignores,
// queries, adoption, SIGKILL and restart with the settings, new settings,
// quit.
func TestLifecycleOnRealControl(t *testing.T) {
	cfg := Config{
		Control: realControl(t),
		Dir:     filepath.Join(shortTempDir(t), testGPU),
		GPU:     testGPU,
	}
	lifecycle(t, cfg)
}
