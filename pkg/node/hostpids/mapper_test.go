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
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpu-dra/vgpu-dra-driver/internal/testenv"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare/preparetest"
)

// fakeProc is a /proc with processes in made-up pid namespaces.
type fakeProc struct {
	t    *testing.T
	root string
}

// add makes /proc/<host> for the process that is pid in namespace ns.
func (f fakeProc) add(host uint32, ns uint64, pid uint32, start uint64) {
	f.t.Helper()
	dir := filepath.Join(f.root, strconv.FormatUint(uint64(host), 10))
	require.NoError(f.t, os.MkdirAll(filepath.Join(dir, "ns"), 0o755))
	require.NoError(f.t, os.Symlink(fmt.Sprintf("pid:[%d]", ns), filepath.Join(dir, "ns", "pid")))
	nspid := strconv.FormatUint(uint64(host), 10)
	if host != pid {
		nspid += "\t" + strconv.FormatUint(uint64(pid), 10)
	}
	require.NoError(f.t, os.WriteFile(filepath.Join(dir, "status"),
		[]byte("Name:\tapp\nTgid:\t"+strconv.FormatUint(uint64(host), 10)+"\nNSpid:\t"+nspid+"\nNSsid:\t1\n"), 0o644))
	f.setStart(host, start)
}

// setStart rewrites the start time (field 22) of /proc/<host>/stat; the
// command name holds ") " to check that fields are counted from the last ')'.
func (f fakeProc) setStart(host uint32, start uint64) {
	f.t.Helper()
	stat := fmt.Sprintf("%d (a) b) S %s%d 0 0\n", host, strings.Repeat("0 ", 18), start)
	require.NoError(f.t, os.WriteFile(filepath.Join(f.root, strconv.FormatUint(uint64(host), 10), "stat"), []byte(stat), 0o644))
}

// mapFile lists path in /proc/<host>/maps, as a process that mapped it.
func (f fakeProc) mapFile(host uint32, path string) {
	f.t.Helper()
	id, err := statFileID(path)
	require.NoError(f.t, err)
	maps := "55d0c0000000-55d0c0001000 r-xp 00000000 08:01 131 /usr/bin/app\n" +
		fmt.Sprintf("7f0000000000-7f0000100000 rw-s 00000000 %02x:%02x %d /usr/local/vgpu/claims/x/shm/region\n", unix.Major(id.dev), unix.Minor(id.dev), id.ino)
	require.NoError(f.t, os.WriteFile(filepath.Join(f.root, strconv.FormatUint(uint64(host), 10), "maps"), []byte(maps), 0o644))
}

func (f fakeProc) remove(host uint32) {
	require.NoError(f.t, os.RemoveAll(filepath.Join(f.root, strconv.FormatUint(uint64(host), 10))))
}

// hostPIDClaim is a prepared claim under dir with its host directory made.
func hostPIDClaim(t *testing.T, dir string, uid types.UID) prepare.PreparedClaim {
	c := preparetest.Prepared(dir, uid, "default", "train")
	c.HostPIDsPath = filepath.Join(dir, string(uid), "host", "pids")
	require.NoError(t, os.MkdirAll(filepath.Dir(c.HostPIDsPath), 0o755))
	return c
}

func slotOf(slot int, ns uint64, pid uint32, start uint64) regiontest.Process {
	return regiontest.Process{Slot: slot, PID: pid, StartTime: start, PIDNamespace: ns, Seq: 2,
		Devices: []regiontest.ProcessDevice{{UsedBytes: mib, PeakBytes: mib}}}
}

func readMap(t *testing.T, c prepare.PreparedClaim) string {
	t.Helper()
	b, err := os.ReadFile(c.HostPIDsPath)
	require.NoError(t, err)
	return string(b)
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return info.Sys().(*syscall.Stat_t).Ino
}

func TestMapperFakeProc(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	proc := fakeProc{t: t, root: t.TempDir()}
	const nsA, nsB, nsGone = 4026532500, 4026532600, 4026532700
	proc.add(1000, nsA, 1, 5555)
	proc.add(1001, nsB, 1, 6666)
	proc.add(1002, nsA, 7, 7777)
	proc.add(1003, nsA, 8, 8888) // not in the claim's region
	require.NoError(t, os.Symlink("1000", filepath.Join(proc.root, "self")))

	c := hostPIDClaim(t, dir, uidA)
	preparetest.WriteRegion(t, c.RegionPath, 3*mib, 3*mib, 0,
		slotOf(0, nsA, 1, 5555),
		slotOf(3, nsB, 1, 6666),
		slotOf(4, nsA, 7, 1),     // pid 7 of nsA was reused: another start time
		slotOf(9, nsGone, 3, 42), // not on this host's /proc
		slotOf(11, 0, 5, 9999))   // pid namespace unknown
	for _, host := range []uint32{1000, 1001, 1002} {
		proc.mapFile(host, c.RegionPath)
	}
	source := preparetest.NewSource()
	source.Set(c)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, err := NewMapper(source, 0)
	require.NoError(t, err)
	m.procRoot = proc.root
	m.now = clk.Now

	m.sync(ctx)
	path := c.HostPIDsPath
	assert.Equal(t, "version=1\n4026532500 1 5555 1000\n4026532600 1 6666 1001\n", readMap(t, c))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())
	before := inode(t, path)

	// Unchanged: the file is left alone (a rename would make a new inode).
	m.sync(ctx)
	assert.Equal(t, before, inode(t, path))

	// The host pid of nsA's pid 1 is reused by another process: dropped.
	proc.setStart(1000, 5556)
	m.sync(ctx)
	assert.Equal(t, "version=1\n4026532600 1 6666 1001\n", readMap(t, c))
	assert.NotEqual(t, before, inode(t, path))

	// A process not found is looked for again only after hostPIDRetry.
	proc.setStart(1002, 1)
	m.sync(ctx)
	assert.Equal(t, "version=1\n4026532600 1 6666 1001\n", readMap(t, c))
	clk.Step(hostPIDRetry)
	m.sync(ctx)
	assert.Equal(t, "version=1\n4026532500 7 1 1002\n4026532600 1 6666 1001\n", readMap(t, c))

	// The process exits: its line goes with it.
	proc.remove(1001)
	m.sync(ctx)
	assert.Equal(t, "version=1\n4026532500 7 1 1002\n", readMap(t, c))
	entries, err := os.ReadDir(filepath.Dir(c.HostPIDsPath))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files are left behind")
}

func TestMapperSkipsWhatItCannotWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	proc := fakeProc{t: t, root: t.TempDir()}
	proc.add(1000, 4026532500, 1, 5555)

	withoutHostDir := preparetest.Prepared(dir, uidA, "default", "a")
	withoutHostDir.HostPIDsPath = filepath.Join(dir, string(uidA), "host", "pids")
	preparetest.WriteRegion(t, withoutHostDir.RegionPath, mib, mib, 0, slotOf(0, 4026532500, 1, 5555))
	noRegion := hostPIDClaim(t, dir, uidB)
	source := preparetest.NewSource()
	source.Set(withoutHostDir, noRegion)
	m, err := NewMapper(source, time.Second)
	require.NoError(t, err)
	m.procRoot = proc.root

	m.sync(ctx)
	_, err = os.Stat(filepath.Dir(withoutHostDir.HostPIDsPath))
	assert.True(t, errors.Is(err, os.ErrNotExist), "the mapper never creates a claim's directories")
	_, err = os.Stat(noRegion.HostPIDsPath)
	assert.True(t, errors.Is(err, os.ErrNotExist), "no map without a region")

	// A corrupt region leaves the last map in place and is reported once.
	require.NoError(t, os.MkdirAll(filepath.Dir(noRegion.RegionPath), 0o755))
	require.NoError(t, os.WriteFile(noRegion.RegionPath, []byte("junk"), 0o666))
	m.sync(ctx)
	m.sync(ctx)
	assert.Len(t, m.errs, 1)
	assert.Contains(t, m.errs[uidB], "corrupt region")
}

func TestNewMapperValidates(t *testing.T) {
	_, err := NewMapper(nil, time.Second)
	assert.ErrorContains(t, err, "claim source")
	_, err = NewMapper(preparetest.NewSource(), -time.Second)
	assert.ErrorContains(t, err, "interval must not be negative")
}

// mapRegionEnv makes the test binary a helper process that maps the file
// named by the variable (as libvgpu.so maps its claim's region) and waits.
const mapRegionEnv = "VGPU_DRA_TEST_MAP_REGION"

func TestMain(m *testing.M) {
	if path := os.Getenv(mapRegionEnv); path != "" {
		os.Exit(mapAndWait(path))
	}
	os.Exit(m.Run())
}

func mapAndWait(path string) int {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("mapped")
	time.Sleep(time.Minute)
	return 0
}

// startInNewPIDNamespace starts a process, pid 1 of a new pid namespace,
// that maps regionPath when it is not empty, else only sleeps.
func startInNewPIDNamespace(t *testing.T, regionPath string) uint32 {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if regionPath != "" {
		cmd = exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), mapRegionEnv+"="+regionPath)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	if err := cmd.Start(); err != nil {
		testenv.Unavailable(t, "cannot start a process in a new pid namespace (needs CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if regionPath != "" {
		line := make([]byte, len("mapped\n"))
		_, err := io.ReadFull(out, line)
		require.NoError(t, err, "helper process did not map the region")
	}
	return uint32(cmd.Process.Pid)
}

// Real processes, each pid 1 of a new pid namespace: the claim's (it maps
// the region) is mapped to the pid this (host namespace) process knows it
// by; a foreign one that a slot names all the same is not.
func TestMapperRealProcess(t *testing.T) {
	dir := t.TempDir()
	c := hostPIDClaim(t, dir, uidA)
	preparetest.WriteRegion(t, c.RegionPath, mib, mib, 0)
	host := startInNewPIDNamespace(t, c.RegionPath)
	foreign := startInNewPIDNamespace(t, "")
	procDir := filepath.Join("/proc", strconv.FormatUint(uint64(host), 10))
	ns, ok := pidNamespace(procDir)
	require.True(t, ok)
	require.Equal(t, uint32(1), innermostPID(procDir), "the child is pid 1 of its namespace")
	foreignNS, ok := pidNamespace(filepath.Join("/proc", strconv.FormatUint(uint64(foreign), 10)))
	require.True(t, ok)

	m, err := NewMapper(preparetest.NewSource(), 0)
	require.NoError(t, err)
	start := m.startTime(host)
	require.NotZero(t, start)
	foreignStart := m.startTime(foreign)
	require.NotZero(t, foreignStart)
	// Rewrite the region in place (the helper keeps its mapping of this inode).
	preparetest.WriteRegion(t, c.RegionPath, mib, mib, 0, slotOf(0, ns, 1, start), slotOf(1, ns, 1, start+1), slotOf(2, foreignNS, 1, foreignStart))
	m.claims = preparetest.NewSource(c)

	m.sync(context.Background())
	assert.Equal(t, fmt.Sprintf("version=1\n%d 1 %d %d\n", ns, start, host), readMap(t, c))
}

// A slot that names a process of the same pid namespace that is not the
// claim's (e.g. another container of the pod, or a process the container
// started without the library) is not mapped, and the membership checks
// of one sync are bounded.
func TestMapperMapsOnlyTheClaimsProcesses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	proc := fakeProc{t: t, root: t.TempDir()}
	const ns = 4026532500
	c := hostPIDClaim(t, dir, uidA)
	other := hostPIDClaim(t, dir, uidB)
	preparetest.WriteRegion(t, other.RegionPath, mib, mib, 0)
	var slots []regiontest.Process
	for i := range maxMembershipChecks + 6 {
		host := uint32(2000 + i)
		proc.add(host, ns, uint32(10+i), uint64(100+i))
		slots = append(slots, slotOf(i, ns, uint32(10+i), uint64(100+i)))
	}
	preparetest.WriteRegion(t, c.RegionPath, mib, mib, 0, slots...)
	for i := range maxMembershipChecks + 6 {
		switch i {
		case 0:
			// Foreign: no maps at all (e.g. a process of the host).
		case 1:
			proc.mapFile(2001, other.RegionPath) // another claim's process
		default:
			proc.mapFile(uint32(2000+i), c.RegionPath)
		}
	}
	source := preparetest.NewSource()
	source.Set(c)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, err := NewMapper(source, 0)
	require.NoError(t, err)
	m.procRoot = proc.root
	m.now = clk.Now

	m.sync(ctx)
	first := strings.Count(readMap(t, c), "\n") - 1
	assert.Equal(t, maxMembershipChecks-2, first, "one sync checks at most maxMembershipChecks processes, two of them foreign")
	m.sync(ctx)
	got := readMap(t, c)
	assert.Equal(t, maxMembershipChecks+4, strings.Count(got, "\n")-1, "the next sync carries on")
	assert.NotContains(t, got, " 2000\n", "a process without the region is not the claim's")
	assert.NotContains(t, got, " 2001\n", "another claim's process is not this claim's")

	// The foreign process is looked at again only after hostPIDRetry, and
	// still not mapped.
	clk.Step(hostPIDRetry)
	m.sync(ctx)
	assert.Equal(t, got, readMap(t, c))
}

func TestMapperRunStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m, err := NewMapper(preparetest.NewSource(), time.Millisecond)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		m.Run(ctx)
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// BenchmarkMapperScan measures one scan of this machine's /proc, the
// cost of a sync that meets a new process, with every process in a
// claim's namespace (the worst case: a container of the host namespace).
func BenchmarkMapperScan(b *testing.B) {
	m, err := NewMapper(preparetest.NewSource(), 0)
	require.NoError(b, err)
	entries, err := os.ReadDir("/proc")
	require.NoError(b, err)
	ns, ok := pidNamespace("/proc/self")
	require.True(b, ok)
	for b.Loop() {
		m.scan(map[uint64]bool{ns: true})
	}
	b.ReportMetric(float64(len(entries)), "proc-entries")
}

// A region a container grew by writing past its end is cut back to its size
// at the next sync (prepare.TrimRegion, tested there); its content is kept.
func TestMapperCutsBackGrownRegions(t *testing.T) {
	dir := t.TempDir()
	c := hostPIDClaim(t, dir, uidA)
	preparetest.WriteRegion(t, c.RegionPath, mib, mib, 0)
	before, err := os.ReadFile(c.RegionPath)
	require.NoError(t, err)
	m, err := NewMapper(preparetest.NewSource(c), 0)
	require.NoError(t, err)

	f, err := os.OpenFile(c.RegionPath, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 8<<20), int64(len(before)))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	m.sync(context.Background())
	after, err := os.ReadFile(c.RegionPath)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}
