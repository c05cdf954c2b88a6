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

package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/flags"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpshost"
)

func TestEveryFlagIsDocumentedWithItsEnvironmentVariable(t *testing.T) {
	cmd := newCommand()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		assert.NotEmpty(t, strings.TrimSpace(f.Usage), "flag --%s has no help text", f.Name)
		assert.Contains(t, f.Usage, "[$", "flag --%s does not name its environment variable", f.Name)
	})
}

func TestValidateNamesTheBadFlag(t *testing.T) {
	o := newOptions()
	o.gpuEdits = "guess"
	o.stateRoot = ""
	o.hostPIDInterval = 0
	err := o.validate()
	require.Error(t, err)
	for _, want := range []string{"--node-name", "--gpu-edits", `"guess"`, "--state-root", "--host-pid-interval"} {
		assert.Contains(t, err.Error(), want)
	}

	o = newOptions()
	o.nodeName = "node-a"
	assert.NoError(t, o.validate())
}

func TestEnvironmentConfiguresTheCommand(t *testing.T) {
	t.Setenv("NODE_NAME", "from-env")
	t.Setenv("VGPU_DRA_GPU_EDITS", "cdi-spec")
	cmd := newCommand()
	require.NoError(t, cmd.ParseFlags([]string{"--state-root=/tmp/x"}))
	require.NoError(t, flags.Apply(cmd.Flags()))
	assert.Equal(t, "from-env", cmd.Flags().Lookup("node-name").Value.String())
	assert.Equal(t, "cdi-spec", cmd.Flags().Lookup("gpu-edits").Value.String())
	assert.Equal(t, "/tmp/x", cmd.Flags().Lookup("state-root").Value.String())
}

func TestMPSIsOffByDefault(t *testing.T) {
	cmd := newCommand()
	require.NoError(t, cmd.ParseFlags(nil))
	assert.Equal(t, "false", cmd.Flags().Lookup("mps").Value.String())
	assert.Nil(t, newOptions().mpsOptions(), "without --mps no MPS device is prepared")
	assert.Equal(t, devices.MIGOptions{PartitionableDevices: true}, newOptions().publishOptions(), "without --mps no MPS device is published")

	o := newOptions()
	o.mps = true
	assert.Equal(t, devices.MIGOptions{PartitionableDevices: true, MPS: true}, o.publishOptions(), "--mps publishes MPS devices")

	o = newOptions()
	o.mps, o.nvidiaDriverRoot = true, "/driver-root"
	require.NotNil(t, o.mpsOptions())
	assert.Equal(t, "/driver-root/usr/bin/nvidia-cuda-mps-control", o.mpsOptions().Control, "the driver's own program")
	o.mpsControl = "/opt/nvidia/nvidia-cuda-mps-control"
	assert.Equal(t, "/opt/nvidia/nvidia-cuda-mps-control", o.mpsOptions().Control)
	assert.Nil(t, o.mpsOptions().Runner, "without --mps-host-socket the plugin starts the daemons itself")
	o.mpsHostSocket = "/var/lib/vgpu-dra/mps/host.sock"
	assert.Equal(t, mpshost.Runner{Socket: "/var/lib/vgpu-dra/mps/host.sock"}, o.mpsOptions().Runner, "the mps-host pod starts them")
}

func TestMPSHostNeedsOnlyItsSocket(t *testing.T) {
	o := newOptions()
	o.mpsHost = true
	require.ErrorContains(t, o.validate(), "--mps-host-socket: required with --mps-host")
	o.mpsHostSocket = "/var/lib/vgpu-dra/mps/host.sock"
	assert.NoError(t, o.validate(), "no --node-name needed")
}
