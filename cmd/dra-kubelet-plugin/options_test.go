package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/flags"
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
