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
	"strconv"
	"strings"
)

// MPSDeviceName is the name of the MPS device of the GPU with NVML index
// index: "gpu-<index>-mps" (docs/mps.md).
func MPSDeviceName(index int) string {
	return Name(index) + "-mps"
}

// ParseMPSDeviceName returns the NVML index of the GPU whose MPS device is
// name; ok is false for any other name.
func ParseMPSDeviceName(name string) (index int, ok bool) {
	rest, found := strings.CutPrefix(name, "gpu-")
	if !found {
		return 0, false
	}
	idx, found := strings.CutSuffix(rest, "-mps")
	if !found {
		return 0, false
	}
	index, err := strconv.Atoi(idx)
	if err != nil || index < 0 || strconv.Itoa(index) != idx {
		return 0, false
	}
	return index, true
}
