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

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestQuantityVar(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	q := resource.MustParse("256Mi")
	QuantityVar(fs, &q, "memory-min", "smallest memory")
	assert.Equal(t, "256Mi", fs.Lookup("memory-min").DefValue)
	assert.Equal(t, "quantity", fs.Lookup("memory-min").Value.Type())

	require.NoError(t, fs.Parse([]string{"--memory-min=1Gi"}))
	assert.Equal(t, int64(1<<30), q.Value())
}

func TestQuantityVarRejectsGarbage(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	q := resource.MustParse("1Mi")
	QuantityVar(fs, &q, "memory-step", "step")
	err := fs.Parse([]string{"--memory-step=lots"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "memory-step")
	assert.Equal(t, "1Mi", q.String(), "a rejected value leaves the flag unchanged")
}

// Mirrored quantities come through the environment like any other flag.
func TestQuantityVarFromEnvironment(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	q := resource.MustParse("1Mi")
	QuantityVar(fs, &q, "memory-step", "step")
	Mirror(fs, "VGPU_DRA")
	t.Setenv("VGPU_DRA_MEMORY_STEP", "4Mi")
	require.NoError(t, fs.Parse(nil))
	require.NoError(t, Apply(fs))
	assert.Equal(t, int64(4<<20), q.Value())
}
