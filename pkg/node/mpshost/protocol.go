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

package mpshost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
)

// Request is one invocation of the control program, the client's only
// message on a connection, which it then half-closes.
type Request struct {
	// Path is the control program; Args, Env (the whole environment) and
	// Stdin are its arguments, environment and standard input.
	Path  string   `json:"path"`
	Args  []string `json:"args,omitempty"`
	Env   []string `json:"env,omitempty"`
	Stdin string   `json:"stdin,omitempty"`
}

// Response is the server's answer once the invocation has ended.
type Response struct {
	// Output is what the program wrote to standard output and standard
	// error.
	Output []byte `json:"output,omitempty"`
	// ExitCode is the program's exit status; -1 when it did not run or
	// was killed by a signal (Error says which).
	ExitCode int `json:"exitCode"`
	// Error says why the program did not run or end normally; empty when
	// it exited.
	Error string `json:"error,omitempty"`
}

// maxMessage bounds a request or response: commands and answers of the
// control program are a few lines.
const maxMessage = 1 << 20

// Runner runs the control program through the mps-host server listening
// on Socket. It implements mpsdaemon.Runner.
type Runner struct {
	Socket string
}

var _ mpsdaemon.Runner = Runner{}

// Run sends inv to the server and returns the program's output; an exit
// status other than 0 is an error, as exec's.
func (r Runner) Run(ctx context.Context, inv mpsdaemon.Invocation) ([]byte, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", r.Socket)
	if err != nil {
		// No server listens: the mps-host pod is not (yet) running on
		// this node, or is being replaced.
		return nil, fmt.Errorf("mps-host %s does not answer (is the mps-host pod of this node running?): %w: %w", r.Socket, mpsdaemon.ErrRunnerUnavailable, err)
	}
	defer func() { _ = conn.Close() }()
	// A call that ends closes the connection; the server then stops
	// waiting for the program (a daemon it started keeps running).
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := Request{Path: inv.Path, Args: inv.Args, Env: inv.Env, Stdin: inv.Stdin}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, r.wrap(ctx, err)
	}
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return nil, r.wrap(ctx, err)
	}
	var resp Response
	if err := json.NewDecoder(io.LimitReader(conn, maxMessage)).Decode(&resp); err != nil {
		return nil, r.wrap(ctx, fmt.Errorf("read the response: %w", err))
	}
	switch {
	case resp.Error != "":
		return resp.Output, fmt.Errorf("mps-host: %s", resp.Error)
	case resp.ExitCode != 0:
		return resp.Output, &ExitError{Code: resp.ExitCode}
	}
	return resp.Output, nil
}

func (r Runner) wrap(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = errors.Join(ctxErr, err)
	}
	return fmt.Errorf("mps-host %s: %w", r.Socket, err)
}

// ExitError is a program that ran and exited with a status other than 0.
type ExitError struct {
	Code int
}

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }
