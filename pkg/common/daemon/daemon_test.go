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

package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// execute runs cmd once; logging configuration may be applied only once per
// process, so each test execution starts from a reset one.
func execute(t *testing.T, c Command) error {
	t.Helper()
	require.NoError(t, logsapi.ResetForTest(nil))
	cmd := NewCobra(c)
	cmd.SetArgs(nil)
	return cmd.Execute()
}

func testCommand(run func(ctx context.Context, node string) error, validate func() error) Command {
	var node string
	return Command{
		Name:  "test-daemon",
		Short: "test",
		Long:  "A daemon under test.",
		AddFlags: func(named *cliflag.NamedFlagSets) {
			named.FlagSet("main").StringVar(&node, "node-name", "", "Node name.")
		},
		UnprefixedEnv: []string{"node-name"},
		Validate:      validate,
		Run:           func(ctx context.Context) error { return run(ctx, node) },
	}
}

func TestCommandAppliesEnvThenValidatesThenRuns(t *testing.T) {
	t.Setenv("NODE_NAME", "node-a")
	var seen string
	c := testCommand(func(_ context.Context, node string) error {
		seen = node
		return context.Canceled // a clean stop
	}, func() error { return nil })
	require.NoError(t, execute(t, c))
	assert.Equal(t, "node-a", seen)
	cmd := NewCobra(c)
	assert.Contains(t, cmd.Flags().Lookup("node-name").Usage, "[$NODE_NAME]")
	assert.NotNil(t, cmd.Flags().Lookup("v"), "the logging flags are registered")
}

func TestCommandStopsOnValidationAndRunErrors(t *testing.T) {
	ran := false
	c := testCommand(func(context.Context, string) error { ran = true; return nil }, func() error { return errors.New("--node-name is required") })
	err := execute(t, c)
	assert.ErrorContains(t, err, "--node-name is required")
	assert.False(t, errors.As(err, new(loggedError)), "a validation error is for Execute to print")
	assert.False(t, ran, "Run must not start after a validation error")

	c = testCommand(func(context.Context, string) error { return errors.New("boom") }, func() error { return nil })
	err = execute(t, c)
	assert.ErrorContains(t, err, "boom")
	assert.True(t, errors.As(err, new(loggedError)), "a failed run was logged already")
}

func TestServeHTTPServesUntilShutdown(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	stop, err := ServeHTTP(context.Background(), addr, mux)
	require.NoError(t, err)
	resp, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "ok", string(body))

	stop(time.Second)
	resp, err = http.Get("http://" + addr + "/healthz")
	if !assert.Error(t, err, "nothing serves after shutdown") {
		_ = resp.Body.Close()
	}

	_, err = ServeHTTP(context.Background(), "not-an-address", mux)
	assert.ErrorContains(t, err, "--http-address")
}
