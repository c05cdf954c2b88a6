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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

func TestXIDTaintEffects(t *testing.T) {
	p := TaintPolicy{NoExecute: DefaultNoExecuteXIDs()}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	fatal := p.XIDTaint(79, at)
	assert.Equal(t, "vgpu.dra.dev/xid", fatal.Key)
	assert.Equal(t, "79", fatal.Value)
	assert.Equal(t, resourceapi.DeviceTaintEffectNoExecute, fatal.Effect)
	assert.Equal(t, at, fatal.TimeAdded.Time)
	assert.Equal(t, resourceapi.DeviceTaintEffectNoSchedule, p.Effect(94), "a contained ECC error leaves running work alive")
	assert.Equal(t, resourceapi.DeviceTaintEffectNoSchedule, TaintPolicy{}.Effect(79), "the NoExecute set is configurable")
	assert.Empty(t, apivalidation.IsQualifiedName(fatal.Key), "key must be a label name")
	assert.Empty(t, apivalidation.IsValidLabelValue(fatal.Value), "value must be a label value")
	assert.Greater(t, Severity(resourceapi.DeviceTaintEffectNoExecute), Severity(resourceapi.DeviceTaintEffectNoSchedule))
	assert.Greater(t, Severity(resourceapi.DeviceTaintEffectNoSchedule), Severity(resourceapi.DeviceTaintEffectNone))
}

func TestWithTaintsTaintsOnlyNamedDevices(t *testing.T) {
	infos := []discovery.Info{{UUID: "GPU-a", Index: 0, MemoryBytes: 8 << 30}, {UUID: "GPU-b", Index: 1, MemoryBytes: 8 << 30}}
	pool := Pool(infos, Options{})
	taint := TaintPolicy{}.XIDTaint(31, time.Unix(1, 0))
	tainted := WithTaints(pool, map[string][]resourceapi.DeviceTaint{"gpu-1": {taint}})
	require.Len(t, tainted.Slices[0].Devices, 2)
	assert.Empty(t, tainted.Slices[0].Devices[0].Taints)
	assert.Equal(t, []resourceapi.DeviceTaint{taint}, tainted.Slices[0].Devices[1].Taints)
	assert.Empty(t, pool.Slices[0].Devices[1].Taints, "the untainted pool is not modified")
	tainted.Slices[0].Devices[1].Taints[0].TimeAdded.Time = time.Unix(2, 0)
	assert.Equal(t, time.Unix(1, 0), taint.TimeAdded.Time, "the published taint shares nothing with the caller's")
	assert.Empty(t, WithTaints(tainted, nil).Slices[0].Devices[1].Taints, "lifting publishes the device without taints")
}

// An XID of a GPU in MIG mode taints its whole-GPU device and every MIG
// device of it, and nothing of the other GPU.
func TestWithTaintsTaintsMIGDevicesOfTheGPU(t *testing.T) {
	pool, _ := MIGPool([]GPU{migGPU(t, 0, geometries[0].config), migGPU(t, 1, geometries[0].config)}, Options{}, partitionable)
	taint := TaintPolicy{}.XIDTaint(79, time.Unix(1, 0))
	tainted := WithTaints(pool, map[string][]resourceapi.DeviceTaint{Name(1): {taint}})
	seen := map[bool]int{}
	for _, s := range tainted.Slices {
		for _, d := range s.Devices {
			onGPU1 := d.Name == Name(1) || strings.HasPrefix(d.Name, Name(1)+"-mig-")
			seen[onGPU1]++
			if onGPU1 {
				assert.Equal(t, []resourceapi.DeviceTaint{taint}, d.Taints, d.Name)
			} else {
				assert.Empty(t, d.Taints, d.Name)
			}
		}
	}
	assert.Greater(t, seen[true], 1, "GPU 1's MIG devices were published")
	assert.Equal(t, seen[true], seen[false], "both GPUs publish the same devices")
}
