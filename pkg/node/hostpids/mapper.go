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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/atomicfile"
	pidmap "github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// Host pid map of a claim (format: pkg/contract/hostpids), at
// prepare.PreparedClaim.HostPIDsPath.
const (
	// DefaultInterval is how often the maps are brought up to date.
	DefaultInterval = time.Second

	hostPIDFileMode = 0o644
	// hostPIDRetry is how long a process that could not be found in /proc
	// (its slot outlived it, or it is not on this host's /proc) waits
	// before it is looked for again, so that such slots do not cost a
	// /proc scan every interval.
	hostPIDRetry = 10 * time.Second
	// maxMembershipChecks bounds how many processes a sync checks for the
	// claim's region in /proc/<pid>/maps; the rest wait for the next sync.
	// Slots are written by containers, so without a bound one claim could
	// make every sync read the maps of many processes.
	maxMembershipChecks = 64
	// maxMapsBytes bounds how much of one /proc/<pid>/maps is read.
	maxMapsBytes = 16 << 20
)

// ClaimSource lists the claims prepared on this node; *prepare.Manager is one.
type ClaimSource interface {
	PreparedClaims() []prepare.PreparedClaim
}

// procID identifies a process of a region slot in its own pid namespace.
type procID struct {
	pidNS     uint64
	pid       uint32
	startTime uint64
}

// claimProc is a process named by a slot of the claim's region.
type claimProc struct {
	claim types.UID
	procID
}

// fileID identifies a file as /proc/<pid>/maps names it.
type fileID struct {
	dev uint64
	ino uint64
}

// Mapper writes, for every prepared claim, the host pids of the
// processes in the claim's shared region to its HostPIDsPath, so that
// libvgpu.so inside a container (own pid namespace and /proc) can match
// NVML's per-process data, which names host pids. It must run in the
// host pid namespace.
//
// A slot (pid namespace inode, pid, start time) is resolved to the host
// process whose /proc/<pid>/ns/pid has that inode and whose innermost
// NSpid is that pid, and accepted only if that process's start time
// (/proc/<pid>/stat field 22) matches, so a reused pid is never reported,
// and if the process has the claim's region mapped (/proc/<pid>/maps names
// the region file's device and inode). Slots are written by the claim's
// containers, so the last check keeps a container from learning the host
// pid of a process that is not the claim's own. Membership checks are
// bounded per sync (maxMembershipChecks). The file is replaced atomically
// and only when its content changes.
type Mapper struct {
	claims   ClaimSource
	interval time.Duration
	procRoot string
	now      func() time.Time
	reader   *region.Reader

	// written is the content of each claim's map as last written or found.
	written map[types.UID][]byte
	// resolved caches host pids found earlier; each is verified again on
	// use (same process), its membership once when found.
	resolved map[claimProc]uint32
	// missed holds when each unresolvable process may be looked for again.
	missed map[claimProc]time.Time
	// checks counts the membership checks of the current sync.
	checks int
	// errs is the last error logged per claim, so a lasting problem is
	// logged once.
	errs map[types.UID]string
}

// NewMapper returns a Mapper over the claims of source that updates
// the maps every interval (zero means DefaultInterval).
func NewMapper(source ClaimSource, interval time.Duration) (*Mapper, error) {
	if source == nil {
		return nil, errors.New("host pid mapper: claim source is required")
	}
	if interval < 0 {
		return nil, fmt.Errorf("host pid mapper: interval must not be negative, got %s", interval)
	}
	if interval == 0 {
		interval = DefaultInterval
	}
	return &Mapper{
		claims:   source,
		interval: interval,
		procRoot: "/proc",
		now:      time.Now,
		reader:   region.NewReader(),
		written:  map[types.UID][]byte{},
		resolved: map[claimProc]uint32{},
		missed:   map[claimProc]time.Time{},
		errs:     map[types.UID]string{},
	}, nil
}

// Run updates the maps every interval until ctx ends.
func (p *Mapper) Run(ctx context.Context) {
	klog.FromContext(ctx).V(2).Info("Writing host pid maps", "interval", p.interval)
	ticker := time.NewTicker(p.interval)
	defer ticker.Stop()
	for {
		p.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// sync brings every prepared claim's map up to date once.
func (p *Mapper) sync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	prepared := p.claims.PreparedClaims()
	live := make(map[types.UID]bool, len(prepared))
	// Every region first: a /proc scan then reads the status of only the
	// processes in the namespaces of some claim.
	type claimProcs struct {
		uid    types.UID
		path   string
		region fileID
		ids    []procID
	}
	var work []claimProcs
	seen := map[claimProc]bool{}
	namespaces := map[uint64]bool{}
	for _, c := range prepared {
		live[c.UID] = true
		if c.HostPIDsPath == "" || c.RegionPath == "" {
			continue
		}
		if trimmed, err := prepare.TrimRegion(c.RegionPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.logOnce(logger, c.UID, err, "Cannot check the size of the claim's region")
		} else if trimmed {
			logger.Info("Cut back a region that a container grew past its size", "claim", c.UID, "path", c.RegionPath)
		}
		reg, err := p.reader.Read(c.RegionPath)
		if errors.Is(err, fs.ErrNotExist) {
			continue // being unprepared, or not restored yet
		}
		if err != nil {
			p.logOnce(logger, c.UID, err, "Cannot read the claim's region for its host pid map")
			continue
		}
		regionFile, err := statFileID(c.RegionPath)
		if err != nil {
			p.logOnce(logger, c.UID, err, "Cannot identify the claim's region for its host pid map")
			continue
		}
		w := claimProcs{uid: c.UID, path: c.HostPIDsPath, region: regionFile}
		for _, proc := range reg.Processes {
			id := procID{pidNS: proc.PIDNamespace, pid: proc.PID, startTime: proc.StartTime}
			if id.pidNS != 0 {
				w.ids = append(w.ids, id)
				seen[claimProc{c.UID, id}] = true
				namespaces[id.pidNS] = true
			}
		}
		work = append(work, w)
	}
	var index *procIndex
	p.checks = 0
	for _, c := range work {
		var entries []pidmap.Entry
		for _, id := range c.ids {
			host := p.resolve(claimProc{c.uid, id}, c.region, namespaces, &index)
			if host != 0 {
				entries = append(entries, pidmap.Entry{PIDNamespace: id.pidNS, PID: id.pid, StartTime: id.startTime, HostPID: host})
			}
		}
		if err := p.write(c.uid, c.path, pidmap.Render(entries)); err != nil {
			p.logOnce(logger, c.uid, err, "Cannot write the claim's host pid map")
			continue
		}
		delete(p.errs, c.uid)
	}
	for uid := range p.written {
		if !live[uid] {
			delete(p.written, uid)
			delete(p.errs, uid)
		}
	}
	maps.DeleteFunc(p.resolved, func(id claimProc, _ uint32) bool { return !seen[id] })
	maps.DeleteFunc(p.missed, func(id claimProc, _ time.Time) bool { return !seen[id] })
}

func (p *Mapper) logOnce(logger klog.Logger, uid types.UID, err error, msg string) {
	if p.errs[uid] == err.Error() {
		return
	}
	p.errs[uid] = err.Error()
	logger.Error(err, msg, "claim", uid)
}

// resolve returns the host pid of the claim's process id, 0 if it cannot
// be found or is not the claim's (does not map the claim's region). The
// /proc index of the processes in namespaces is built at most once per
// sync, and only when a process is new.
func (p *Mapper) resolve(id claimProc, region fileID, namespaces map[uint64]bool, index **procIndex) uint32 {
	if host, ok := p.resolved[id]; ok {
		if p.matches(host, id.procID) {
			return host
		}
		delete(p.resolved, id)
	}
	if retry, ok := p.missed[id]; ok && p.now().Before(retry) {
		return 0
	}
	if p.checks >= maxMembershipChecks {
		return 0 // the next sync carries on
	}
	if *index == nil {
		*index = p.scan(namespaces)
	}
	for _, host := range (*index).candidates[nsPID{id.pidNS, id.pid}] {
		if p.startTime(host) != id.startTime {
			continue
		}
		p.checks++
		if p.mapsFile(host, region) {
			p.resolved[id] = host
			delete(p.missed, id)
			return host
		}
	}
	p.missed[id] = p.now().Add(hostPIDRetry)
	return 0
}

// mapsFile reports whether /proc/<pid>/maps has a mapping of file.
func (p *Mapper) mapsFile(pid uint32, file fileID) bool {
	f, err := os.Open(filepath.Join(p.procRoot, strconv.FormatUint(uint64(pid), 10), "maps"))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	// Lines: address perms offset dev(major:minor, hex) inode [path].
	want := fmt.Sprintf("%02x:%02x", unix.Major(file.dev), unix.Minor(file.dev))
	ino := strconv.FormatUint(file.ino, 10)
	scanner := bufio.NewScanner(io.LimitReader(f, maxMapsBytes))
	scanner.Buffer(make([]byte, 0, 4096), 64<<10)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) >= 5 && fields[4] == ino && fields[3] == want {
			return true
		}
	}
	return false
}

// statFileID returns the device and inode of path.
func statFileID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, fmt.Errorf("stat %s: %w", path, err)
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}

// matches reports whether host pid host still is the process id.
func (p *Mapper) matches(host uint32, id procID) bool {
	dir := filepath.Join(p.procRoot, strconv.FormatUint(uint64(host), 10))
	ns, ok := pidNamespace(dir)
	return ok && ns == id.pidNS && innermostPID(dir) == id.pid && p.startTime(host) == id.startTime
}

// startTime returns field 22 of /proc/<pid>/stat, 0 if unreadable.
func (p *Mapper) startTime(pid uint32) uint64 {
	b, err := os.ReadFile(filepath.Join(p.procRoot, strconv.FormatUint(uint64(pid), 10), "stat"))
	if err != nil {
		return 0
	}
	// Field 2 (comm) may hold spaces and parentheses: fields resume after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // fields[0] is field 3
	if len(fields) <= startField {
		return 0
	}
	v, err := strconv.ParseUint(fields[startField], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

type nsPID struct {
	ns  uint64
	pid uint32
}

// procIndex maps (pid namespace, innermost pid) to host pids. Normally
// one candidate; several only while /proc changes under the scan.
type procIndex struct {
	candidates map[nsPID][]uint32
}

// scan reads every process's pid namespace under the proc root, and the
// innermost pid of those in namespaces.
func (p *Mapper) scan(namespaces map[uint64]bool) *procIndex {
	idx := &procIndex{candidates: map[nsPID][]uint32{}}
	entries, err := os.ReadDir(p.procRoot)
	if err != nil {
		return idx
	}
	for _, e := range entries {
		host, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || host == 0 {
			continue
		}
		dir := filepath.Join(p.procRoot, e.Name())
		ns, ok := pidNamespace(dir)
		if !ok || !namespaces[ns] {
			continue // exited, not ours to inspect, or of no claim
		}
		if pid := innermostPID(dir); pid != 0 {
			k := nsPID{ns, pid}
			idx.candidates[k] = append(idx.candidates[k], uint32(host))
		}
	}
	return idx
}

// pidNamespace returns the inode of the process's pid namespace from the
// link text of <dir>/ns/pid ("pid:[4026531836]").
func pidNamespace(dir string) (uint64, bool) {
	link, err := os.Readlink(filepath.Join(dir, "ns", "pid"))
	if err != nil {
		return 0, false
	}
	inner, ok := strings.CutPrefix(link, "pid:[")
	if !ok {
		return 0, false
	}
	inner, ok = strings.CutSuffix(inner, "]")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(inner, 10, 64)
	return v, err == nil && v != 0
}

// innermostPID returns the last pid of <dir>/status's NSpid line: the
// process's pid in its own namespace. 0 if unreadable.
func innermostPID(dir string) uint32 {
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "NSpid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		v, err := strconv.ParseUint(f[len(f)-1], 10, 32)
		if err != nil {
			return 0
		}
		return uint32(v)
	}
	return 0
}

// write replaces the claim's map with content unless it has it already.
// A missing host directory (claim prepared by an older plugin, or being
// unprepared) is not an error: there is no one to read the map.
func (p *Mapper) write(uid types.UID, path string, content []byte) error {
	if have, ok := p.written[uid]; ok && bytes.Equal(have, content) {
		return nil
	}
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, content) {
		p.written[uid] = content
		return nil
	}
	// Volatile: the map describes running processes and is rebuilt within
	// an interval; after a crash or reboot an old one only misses entries.
	err := atomicfile.WriteFile(path, content, hostPIDFileMode, atomicfile.Volatile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	p.written[uid] = content
	return nil
}
