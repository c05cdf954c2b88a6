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
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// Runner runs the control program once: to start the daemon (-d, which
// returns once the daemon runs in the background) or to send it commands.
// ExecRunner runs it directly; the plugin's pod runs it in a container of
// its own, so that a daemon outlives a restart of the plugin's container
// (docs/mps.md, where the daemons live).
type Runner interface {
	// Run runs inv to its end and returns what it wrote to standard
	// output and standard error.
	Run(ctx context.Context, inv Invocation) ([]byte, error)
}

// Invocation is one run of the control program.
type Invocation struct {
	Path string
	Args []string
	// Env is the whole environment.
	Env   []string
	Stdin string
}

// ExecRunner runs the control program as a child process.
type ExecRunner struct{}

// Run runs inv. Its output goes to a file (MemFile), not a pipe: a
// daemon that forks into the background inherits the descriptors, and a
// pipe would stay open for as long as the daemon runs.
func (ExecRunner) Run(ctx context.Context, inv Invocation) ([]byte, error) {
	out, err := MemFile("mps-control-output", "")
	if err != nil {
		return nil, fmt.Errorf("output file: %w", err)
	}
	defer func() { _ = out.Close() }()
	cmd := exec.CommandContext(ctx, inv.Path, inv.Args...)
	cmd.Env = inv.Env
	if inv.Stdin != "" {
		cmd.Stdin = strings.NewReader(inv.Stdin)
	}
	cmd.Stdout, cmd.Stderr = out, out
	runErr := cmd.Run()
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return nil, errors.Join(runErr, err)
	}
	data, err := io.ReadAll(out)
	return data, errors.Join(runErr, err)
}

// MemFile is an anonymous file (memfd) holding content, positioned at its
// start: for the control program's standard input and output where the
// container has no writable file system but the state root, and where a
// crash must leave no name behind.
func MemFile(name, content string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
