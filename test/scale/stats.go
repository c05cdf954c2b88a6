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

package scale

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100, nearest rank) of
// ds, or 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// ProcStats are a process's counters from /proc.
type ProcStats struct {
	// PeakRSS is the high-water mark of the resident set, in bytes.
	PeakRSS int64
	// CPU is user plus system time.
	CPU time.Duration
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture Kubernetes runs on.
const clockTicks = 100

// ReadProc reads the counters of process pid.
func ReadProc(pid int) (ProcStats, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("process %d: %w", pid, err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return ParseProc(string(status), string(stat))
}

// ParseProc parses the contents of /proc/<pid>/status (VmHWM) and
// /proc/<pid>/stat (utime, stime).
func ParseProc(status, stat string) (ProcStats, error) {
	var ps ProcStats
	found := false
	for line := range strings.Lines(status) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return ps, fmt.Errorf("status: VmHWM %q: want \"<n> kB\"", strings.TrimSpace(rest))
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return ps, fmt.Errorf("status: VmHWM: %w", err)
			}
			ps.PeakRSS, found = kb<<10, true
		}
	}
	if !found {
		return ps, fmt.Errorf("status: no VmHWM line")
	}
	// The command name (field 2) is in parentheses and may contain spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return ps, fmt.Errorf("stat: no command name")
	}
	f := strings.Fields(stat[end+1:])
	if len(f) < 13 {
		return ps, fmt.Errorf("stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return ps, fmt.Errorf("stat: cpu time %q: %w", s, err)
		}
		ticks += n
	}
	ps.CPU = time.Duration(ticks) * time.Second / clockTicks
	return ps, nil
}

// RequestCount sums apiserver_request_total over all its series in a
// Prometheus text exposition: the requests the API server has answered.
func RequestCount(r io.Reader) (int64, error) {
	var total float64
	seen := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		f := strings.Fields(line[strings.LastIndexByte(line, '}')+1:])
		if len(f) == 0 {
			return 0, fmt.Errorf("apiserver_request_total: no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("apiserver_request_total: %w", err)
		}
		total += v
		seen = true
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading metrics: %w", err)
	}
	if !seen {
		return 0, fmt.Errorf("no apiserver_request_total in the metrics")
	}
	return int64(total), nil
}
