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
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Server is one MPS server of a control daemon: NVIDIA's daemon starts one
// per user id, as that user, and a client of another uid waits until the
// running server's clients are done (docs/mps.md, "Containers of
// different users").
type Server struct {
	PID int
	// UID is the real user id of the server's process.
	UID uint32
	// Clients is how many clients the daemon lists for it.
	Clients int
}

// Servers lists the daemon's servers (get_server_list), each with its
// owner from /proc and its clients (get_client_list).
func Servers(ctx context.Context, cfg Config) ([]Server, error) {
	lines, err := Command(ctx, cfg, "get_server_list")
	if err != nil {
		return nil, err
	}
	var out []Server
	for _, line := range lines {
		pid, err := strconv.Atoi(line)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("MPS control of %s: get_server_list answered %q, not a pid", cfg.GPU, line)
		}
		uid, err := processUID(pid)
		if err != nil {
			// Gone since it was listed.
			continue
		}
		clients, err := Command(ctx, cfg, "get_client_list "+strconv.Itoa(pid))
		if err != nil {
			return nil, err
		}
		n := 0
		for _, c := range clients {
			if v, err := strconv.Atoi(c); err == nil && v > 0 {
				n++
			}
		}
		out = append(out, Server{PID: pid, UID: uid, Clients: n})
	}
	return out, nil
}

// processUID is the real user id of pid (/proc/<pid>/status, "Uid:").
func processUID(pid int) (uint32, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			v, err := strconv.ParseUint(fields[0], 10, 32)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status Uid: %w", pid, err)
			}
			return uint32(v), nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Uid line", pid)
}
