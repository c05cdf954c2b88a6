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

package devices

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseMPSDeviceName(t *testing.T) {
	for _, i := range []int{0, 7, 12} {
		index, ok := ParseMPSDeviceName(MPSDeviceName(i))
		assert.True(t, ok)
		assert.Equal(t, i, index)
	}
	for _, name := range []string{"gpu-0", "gpu--mps", "gpu-01-mps", "gpu-+1-mps", "gpu--1-mps", "gpu-0-mig-1g-10gb-0", "gpu-0-mps-x", "mps"} {
		_, ok := ParseMPSDeviceName(name)
		assert.False(t, ok, name)
	}
}
