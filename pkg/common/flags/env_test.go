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

package flags

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSet() (*pflag.FlagSet, *string, *string, *time.Duration) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	root := fs.String("state-root", "/var/lib/vgpu-dra", "state root")
	node := fs.String("node-name", "", "node name")
	every := fs.Duration("resync-period", time.Minute, "resync")
	Mirror(fs, "VGPU_DRA", "node-name")
	return fs, root, node, every
}

func TestEnvName(t *testing.T) {
	assert.Equal(t, "VGPU_DRA_STATE_ROOT", EnvName("VGPU_DRA", "state-root"))
	assert.Equal(t, "NODE_NAME", EnvName("", "node-name"))
}

func TestMirrorAnnotatesUsage(t *testing.T) {
	fs, _, _, _ := newSet()
	assert.Contains(t, fs.Lookup("state-root").Usage, "[$VGPU_DRA_STATE_ROOT]")
	assert.Contains(t, fs.Lookup("node-name").Usage, "[$NODE_NAME]")
}

func TestApplyPrecedence(t *testing.T) {
	t.Setenv("VGPU_DRA_STATE_ROOT", "/from/env")
	t.Setenv("NODE_NAME", "env-node")
	fs, root, node, every := newSet()
	require.NoError(t, fs.Parse([]string{"--node-name=flag-node"}))
	require.NoError(t, Apply(fs))
	assert.Equal(t, "/from/env", *root, "env applies when the flag is not given")
	assert.Equal(t, "flag-node", *node, "a flag given on the command line wins over env")
	assert.Equal(t, time.Minute, *every, "default stays when neither is set")
}

func TestApplyInvalidNamesVariableAndFlag(t *testing.T) {
	t.Setenv("VGPU_DRA_RESYNC_PERIOD", "soon")
	fs, _, _, _ := newSet()
	require.NoError(t, fs.Parse(nil))
	err := Apply(fs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "$VGPU_DRA_RESYNC_PERIOD")
	assert.Contains(t, err.Error(), "--resync-period")
}
