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

package prepare

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon/mpsdaemontest"
)

// inMountNamespaceEnv marks the test binary re-run in a private mount
// namespace.
const inMountNamespaceEnv = "VGPU_CLAIMS_TEST_MOUNT_NAMESPACE"

// TestMain runs the tests in a mount namespace of their own: the manager
// mounts a tmpfs per claim, and no test may leave a mount on the machine.
// As root the namespace is a plain mount namespace; otherwise it sits in a
// user namespace that maps the caller to root, which may mount tmpfs.
func TestMain(m *testing.M) {
	if os.Getenv(inMountNamespaceEnv) == "" {
		os.Exit(rerunInMountNamespace())
	}
	// Nothing mounted here may propagate to the machine's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "make / private in the test's mount namespace:", err)
		os.Exit(1)
	}
	code := m.Run()
	removeCheckTool()
	mpsdaemontest.RemoveBuilt()
	os.Exit(code)
}

func rerunInMountNamespace() int {
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), inMountNamespaceEnv+"=1")
	attr := &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		attr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
			Pdeathsig:   syscall.SIGKILL,
		}
	}
	cmd.SysProcAttr = attr
	if err := cmd.Run(); err != nil {
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "run the tests in a private mount namespace:", err)
		return 1
	}
	return 0
}

// sharedMount makes dir a shared mount of itself, as the chart's
// Bidirectional volume makes the state root, and unmounts it and whatever
// was mounted below it when the test ends.
func sharedMount(t testing.TB, dir string) {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, unix.Mount(dir, dir, "", unix.MS_BIND, ""))
	require.NoError(t, unix.Mount("", dir, "", unix.MS_SHARED, ""))
	t.Cleanup(func() { unmountUnder(t, dir) })
}

// unmountUnder unmounts dir (each mount stacked on it) and every mount
// below it, deepest first.
func unmountUnder(t testing.TB, dir string) {
	points := mountPoints(t, dir)
	slices.SortFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			t.Errorf("unmount %s: %v", p, err)
		}
	}
}

// mountsUnder lists the mount points below dir.
func mountsUnder(t testing.TB, dir string) []string {
	return slices.DeleteFunc(mountPoints(t, dir), func(p string) bool { return p == dir })
}

// mountPoints lists dir and the mount points below it, once per mount.
func mountPoints(t testing.TB, dir string) []string {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	require.NoError(t, err)
	points := make([]string, 0, len(mounts))
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
	}
	return points
}
