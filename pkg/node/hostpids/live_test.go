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

package hostpids

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	pidmap "github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

func TestPodUIDFromCgroup(t *testing.T) {
	const pod = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	const other = "11111111-2222-3333-4444-555555555555"
	root := t.TempDir()
	write := func(pid, content string) {
		require.NoError(t, os.MkdirAll(filepath.Join(root, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, pid, "cgroup"), []byte(content), 0o644))
	}
	write("10", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/cri-containerd-abc.scope\n")
	write("11", "0::/kubepods/besteffort/pod"+pod+"/0123456789abcdef\n")
	write("12", "12:memory:/kubepods/pod"+pod+"/abc\n11:cpu,cpuacct:/kubepods/pod"+pod+"/abc\n")
	// A container that creates a cgroup below its own named after another
	// pod stays its own pod's.
	write("13", "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/cri-containerd-x.scope/pod"+other+"\n")
	// Seen from the plugin's own cgroup namespace.
	write("14", "0::/../../kubepods-besteffort-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/cri-containerd-x.scope\n")
	write("20", "0::/system.slice/containerd.service\n")
	write("21", "0::/kubepods/podnot-a-uid/abc\n")
	for _, pid := range []uint32{10, 11, 12, 13, 14} {
		got, ok := PodUID(root, pid)
		assert.True(t, ok, "pid %d", pid)
		assert.Equal(t, types.UID(pod), got, "pid %d", pid)
	}
	for _, pid := range []uint32{20, 21, 99} {
		_, ok := PodUID(root, pid)
		assert.False(t, ok, "pid %d", pid)
	}
}

// Slots of dead processes are found from what the container cannot
// write: the slot lock nobody holds any more, or the host pid the Mapper
// resolved gone. A live slot (its lock held) counts nothing.
func TestDeadCharges(t *testing.T) {
	dir := t.TempDir()
	procs := fakeProc{t: t, root: t.TempDir()}
	path := filepath.Join(dir, "region")
	charged := func(slot int, pid uint32, bytes uint64) regiontest.Process {
		p := slotOf(slot, 4026532000, pid, 100+uint64(pid))
		p.Devices[0].ChargedBytes = bytes
		return p
	}
	b, err := regiontest.Ready(1, 1, []regiontest.Device{{UUID: uuid0, MemoryLimitBytes: 8 * gib, UsedBytes: 7 * gib}},
		[]regiontest.Process{
			charged(0, 7, gib),   // alive: lock held, host pid matches
			charged(1, 8, 2*gib), // SIGKILLed: lock free
			charged(2, 9, 4*gib), // lock held (a fork child shares it), host pid gone
		})
	require.NoError(t, err)
	require.NoError(t, regiontest.WriteFile(path, b))
	reg, err := region.NewReader().Read(path)
	require.NoError(t, err)
	require.Len(t, reg.Processes, 3)

	// The owners' locks, from another open file description as the
	// library's are.
	holder, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer func() { _ = holder.Close() }()
	for _, slot := range []int{0, 2} {
		fl := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(region.Size + slot), Len: 1}
		require.NoError(t, unix.FcntlFlock(holder.Fd(), unix.F_OFD_SETLK, &fl))
	}
	procs.add(1007, 4026532000, 7, 107)
	procs.add(1009, 4026532000, 9, 109)
	pids := filepath.Join(dir, "pids")
	require.NoError(t, os.WriteFile(pids, pidmap.Render([]pidmap.Entry{
		{PIDNamespace: 4026532000, PID: 7, StartTime: 107, HostPID: 1007},
		{PIDNamespace: 4026532000, PID: 9, StartTime: 109, HostPID: 1009}}), 0o644))

	assert.Equal(t, []uint64{2 * gib}, DeadCharges(path, reg, pids, procs.root), "the SIGKILLed process's slot")
	procs.remove(1009)
	assert.Equal(t, []uint64{6 * gib}, DeadCharges(path, reg, pids, procs.root), "and the one whose host pid is gone")
	procs.add(1009, 4026532000, 9, 555)
	assert.Equal(t, []uint64{6 * gib}, DeadCharges(path, reg, pids, procs.root), "a reused host pid is not the slot's process")
	assert.Equal(t, []uint64{2 * gib}, DeadCharges(path, reg, "", procs.root), "without the map only the locks tell")
}

// PodPIDs finds a pod's processes by their cgroup, and no other pod's.
func TestPodPIDs(t *testing.T) {
	root := t.TempDir()
	write := func(pid, cgroup string) {
		require.NoError(t, os.MkdirAll(filepath.Join(root, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, pid, "cgroup"), []byte(cgroup), 0o644))
	}
	const uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	write("10", "0::/kubepods/burstable/pod"+uid+"/c0ffee\n")
	write("11", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"+strings.ReplaceAll(uid, "-", "_")+".slice/cri-containerd-1.scope\n")
	write("12", "0::/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/c0ffee\n")
	write("13", "0::/system.slice/containerd.service\n")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "self"), 0o755))
	assert.ElementsMatch(t, []uint32{10, 11}, PodPIDs(root, uid))
	assert.Empty(t, PodPIDs(root, "99999999-2222-3333-4444-555555555555"))
	assert.Empty(t, PodPIDs(filepath.Join(root, "missing"), uid))
}
