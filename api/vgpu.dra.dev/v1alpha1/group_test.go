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

package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// DRA hands a claim's opaque configuration to the driver whose name it
// carries: the API group must be the driver's name.
func TestGroupIsTheDriverName(t *testing.T) {
	assert.Equal(t, names.DriverName, v1alpha1.GroupName)
}
