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

package names

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnvNamesMatchCHeader keeps the Go and C spellings of the environment
// contract equal: the plugin sets what libvgpu.so reads.
func TestEnvNamesMatchCHeader(t *testing.T) {
	header, err := os.ReadFile("../../../vgpu-core/include/vgpu_env.h")
	require.NoError(t, err)
	fromC := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define (VGPU_ENV_[A-Z_]+) "([^"]*)"$`).FindAllStringSubmatch(string(header), -1) {
		fromC[m[1]] = m[2]
	}
	require.NotEmpty(t, fromC, "no #define VGPU_ENV_* in vgpu_env.h")

	assert.Equal(t, fromC["VGPU_ENV_MEMORY_LIMIT"]+"_", EnvMemoryLimitPrefix)
	assert.Equal(t, fromC["VGPU_ENV_SM_LIMIT"]+"_", EnvSMLimitPrefix)
	assert.Equal(t, fromC["VGPU_ENV_SHARED_REGION"], EnvSharedRegion)
}

func TestDerivedNames(t *testing.T) {
	assert.Equal(t, "vgpu.dra.dev/xid", TaintKeyXID)
	assert.Equal(t, "k8s.vgpu.dra.dev", CDIVendor)
	assert.Equal(t, []string{"vgpu.dra.dev", "vgpu-work-conserving.dra.dev", "vgpu-unenforced.dra.dev", "mig.vgpu.dra.dev", "mps.vgpu.dra.dev"}, DeviceClasses())

	classes := DeviceClasses()
	classes[0] = "changed"
	assert.Equal(t, DeviceClass, DeviceClasses()[0], "callers get their own slice")
}
