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
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	pidmap "github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

// What a container writes (its region's slots) is checked here against
// what it cannot write: the kernel's locks on the region file and the
// host's /proc.

// maxCgroupBytes bounds how much of one /proc/<pid>/cgroup is read.
const maxCgroupBytes = 64 << 10

// podCgroup matches a path component naming a pod's cgroup, as the kubelet
// names them with the cgroupfs driver ("pod<uid>") and with the systemd
// driver ("kubepods-burstable-pod<uid with '_' for '-'>.slice").
var podCgroup = regexp.MustCompile(`(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$`)

// PodUID returns the UID of the pod whose cgroup the host process pid is
// in, from <procRoot>/<pid>/cgroup: the outermost path component of the
// kubelet's naming, so a cgroup a container creates below its own cannot
// name another pod, and a process cannot leave its pod's cgroup. False
// when the process is gone or in no pod's cgroup.
func PodUID(procRoot string, pid uint32) (types.UID, bool) {
	f, err := os.Open(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		return "", false
	}
	defer func() { _ = f.Close() }()
	scanner := bufio.NewScanner(io.LimitReader(f, maxCgroupBytes))
	scanner.Buffer(make([]byte, 0, 4096), maxCgroupBytes)
	// Lines: hierarchy-ID:controllers:path. Every hierarchy (v1) names the
	// same pod; the first that names one is taken.
	for scanner.Scan() {
		_, rest, ok := strings.Cut(scanner.Text(), ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		for comp := range strings.SplitSeq(path, "/") {
			if m := podCgroup.FindStringSubmatch(comp); m != nil {
				return types.UID(strings.ReplaceAll(m[1], "_", "-")), true
			}
		}
	}
	return "", false
}

// DeadCharges returns, per device record of reg (read from regionPath),
// the bytes still charged to the claim's counter by slots whose process is
// dead: the slot's lock (byte region.Size + slot of the region file, held
// by the slot's owner for its life, dropped by the kernel when it dies) is
// free, or the host pid the host pid map (hostPIDsPath, written by the
// Mapper) resolved the slot to is gone or is another process now. The
// library gives such bytes back only when one of the claim's processes
// next reclaims; until then they are charged but used by nobody. A lock
// that cannot be queried, and a slot the map does not resolve, count as
// alive.
func DeadCharges(regionPath string, reg *region.Region, hostPIDsPath, procRoot string) []uint64 {
	out := make([]uint64, len(reg.Devices))
	if len(reg.Processes) == 0 {
		return out
	}
	fd, err := unix.Open(regionPath, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	} else {
		defer func() { _ = unix.Close(fd) }()
	}
	hosts := readHostPIDMap(hostPIDsPath)
	p := &Mapper{procRoot: procRoot}
	for _, proc := range reg.Processes {
		dead := fd >= 0 && lockFree(fd, proc.Slot)
		if host, ok := hosts[procID{pidNS: proc.PIDNamespace, pid: proc.PID, startTime: proc.StartTime}]; ok && !dead {
			dead = p.startTime(host) != proc.StartTime
		}
		if !dead {
			continue
		}
		for i, d := range proc.Devices {
			if i < len(out) {
				out[i] = saturatingAdd(out[i], d.ChargedBytes)
			}
		}
	}
	return out
}

// lockFree reports whether no one holds slot's lock.
func lockFree(fd, slot int) bool {
	fl := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(region.Size + slot), Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &fl); err != nil {
		return false
	}
	return fl.Type == unix.F_UNLCK
}

// readHostPIDMap reads a host pid map by the process it names; a map
// that is missing or that the library would refuse gives none.
func readHostPIDMap(path string) map[procID]uint32 {
	out := map[procID]uint32{}
	if path == "" {
		return out
	}
	entries, err := pidmap.ReadFile(path)
	if err != nil {
		return out
	}
	for _, e := range entries {
		out[procID{pidNS: e.PIDNamespace, pid: e.PID, startTime: e.StartTime}] = e.HostPID
	}
	return out
}

func saturatingAdd(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

// PodPIDs returns the pids under procRoot whose cgroup names the pod uid
// (PodUID): the pod's container processes as the host sees them.
func PodPIDs(procRoot string, uid types.UID) []uint32 {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	var out []uint32
	for _, e := range entries {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || pid == 0 {
			continue
		}
		if got, ok := PodUID(procRoot, uint32(pid)); ok && got == uid {
			out = append(out, uint32(pid))
		}
	}
	return out
}
