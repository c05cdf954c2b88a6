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
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

const (
	// Version is the format version of the map.
	Version = 1
	// MaxEntries bounds a map: one line per region slot.
	MaxEntries = region.MaxSlots
	// MaxBytes bounds a map: the version line and MaxEntries lines of
	// four maximal numbers.
	MaxBytes = 16 + MaxEntries*64
	// MaxPID is the largest pid Linux hands out (PID_MAX_LIMIT on 64-bit).
	MaxPID = 4194304
)

// header is the first line of a map of this version.
var header = "version=" + strconv.Itoa(Version) + "\n"

// Entry is one process of the claim: its identity in its own pid
// namespace (as its region slot names it) and its host pid.
type Entry struct {
	PIDNamespace uint64
	PID          uint32
	StartTime    uint64
	HostPID      uint32
}

// line is the entry's line in a map, without the newline.
func (e Entry) line() string {
	return fmt.Sprintf("%d %d %d %d", e.PIDNamespace, e.PID, e.StartTime, e.HostPID)
}

// Render returns the map file of entries, its lines sorted as text so that
// the same processes always give the same bytes.
func Render(entries []Entry) []byte {
	lines := make([]string, 0, len(entries))
	for _, e := range entries {
		lines = append(lines, e.line())
	}
	slices.SortFunc(lines, cmp.Compare[string])
	var b strings.Builder
	b.WriteString(header)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// Parse reads a map and refuses the whole file on any deviation from the
// format: more than MaxBytes, a first line other than version=1, a line
// not ending in a newline, fields that are not decimal without sign or
// leading zeros or not one space apart, a pid namespace of 0, a pid or
// host pid outside 1..MaxPID, more than MaxEntries lines. The error names
// the line.
func Parse(data []byte) ([]Entry, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("host pid map: larger than %d bytes", MaxBytes)
	}
	rest, ok := strings.CutPrefix(string(data), header)
	if !ok {
		return nil, errors.New("host pid map: line 1: want \"version=1\"")
	}
	var out []Entry
	for n := 2; rest != ""; n++ {
		if len(out) == MaxEntries {
			return nil, fmt.Errorf("host pid map: line %d: more than %d processes", n, MaxEntries)
		}
		line, tail, ok := strings.Cut(rest, "\n")
		e, err := parseLine(line)
		if !ok || err != nil {
			return nil, fmt.Errorf("host pid map: line %d: want \"<pidns inode> <pid> <start time> <host pid>\" in decimal", n)
		}
		out = append(out, e)
		rest = tail
	}
	return out, nil
}

// parseLine parses the four fields of one entry.
func parseLine(line string) (Entry, error) {
	f := strings.Split(line, " ")
	if len(f) != 4 {
		return Entry{}, errors.New("not four fields")
	}
	ns, err1 := decimal(f[0], 1, ^uint64(0))
	pid, err2 := decimal(f[1], 1, MaxPID)
	start, err3 := decimal(f[2], 0, ^uint64(0))
	host, err4 := decimal(f[3], 1, MaxPID)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return Entry{}, err
	}
	return Entry{PIDNamespace: ns, PID: uint32(pid), StartTime: start, HostPID: uint32(host)}, nil
}

// decimal parses digits without sign or leading zero, in [lo, hi].
func decimal(s string, lo, hi uint64) (uint64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%q is not in %d..%d", s, lo, hi)
	}
	return v, nil
}

// ReadFile reads and parses the map at path, at most one byte past
// MaxBytes of it, as the library does.
func ReadFile(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read host pid map %s: %w", path, err)
	}
	entries, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}
