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
	"slices"
	"strconv"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// TaintKeyXID is the key of the taint a GPU gets when NVML reports a
// critical XID error on it; the value is the XID number.
const TaintKeyXID = names.TaintKeyXID

// DefaultNoExecuteXIDs are the XIDs after which the GPU cannot run work
// until it is reset, so pods using it are evicted (NoExecute) rather than
// only kept from arriving (NoSchedule). They follow NVIDIA's XID catalog,
// which asks for a GPU reset or node reboot for them:
// 48 double-bit ECC error, 62 internal micro-controller halt, 64 ECC page
// retirement or row remapping failure, 74 NVLink error, 79 GPU has fallen
// off the bus, 95 uncontained ECC error, 119 and 120 GSP RPC timeout /
// GSP error, 140 unrecovered ECC error.
// Every other reported XID (e.g. 63 page retirement recorded, 92 high
// single-bit ECC rate, 94 contained ECC error) leaves running work alive
// but makes the GPU suspect, so it only keeps new claims away.
func DefaultNoExecuteXIDs() []uint64 {
	return []uint64{48, 62, 64, 74, 79, 95, 119, 120, 140}
}

// TaintPolicy decides the effect of an XID's taint.
type TaintPolicy struct {
	// NoExecute lists the XIDs whose taint evicts; all others get NoSchedule.
	NoExecute []uint64
}

// Effect is the taint effect for xid.
func (p TaintPolicy) Effect(xid uint64) resourceapi.DeviceTaintEffect {
	if slices.Contains(p.NoExecute, xid) {
		return resourceapi.DeviceTaintEffectNoExecute
	}
	return resourceapi.DeviceTaintEffectNoSchedule
}

// XIDTaint is the taint of a GPU that reported xid at time at.
func (p TaintPolicy) XIDTaint(xid uint64, at time.Time) resourceapi.DeviceTaint {
	return resourceapi.DeviceTaint{
		Key:       TaintKeyXID,
		Value:     strconv.FormatUint(xid, 10),
		Effect:    p.Effect(xid),
		TimeAdded: &metav1.Time{Time: at},
	}
}

// Severity orders taint effects: NoExecute over NoSchedule over anything
// else, so that a GPU keeps the worst taint it earned.
func Severity(e resourceapi.DeviceTaintEffect) int {
	switch e {
	case resourceapi.DeviceTaintEffectNoExecute:
		return 2
	case resourceapi.DeviceTaintEffectNoSchedule:
		return 1
	default:
		return 0
	}
}

// WithTaints returns a copy of pool whose devices carry taints[device name];
// devices without an entry are published untainted. A GPU's taints (keyed by
// its device name, gpu-<index>) also go to every MIG device of that GPU
// (named by its parentIndex attribute): NVML reports XIDs per physical GPU,
// and an instance of a failing GPU is as unusable as the whole. A MIG
// device's own entry (an XID NVML attributed to its instance) taints only
// it. Neither pool
// nor taints is modified or shared with the result.
func WithTaints(pool resourceslice.Pool, taints map[string][]resourceapi.DeviceTaint) resourceslice.Pool {
	out := pool
	out.Slices = make([]resourceslice.Slice, len(pool.Slices))
	for i, s := range pool.Slices {
		out.Slices[i] = s
		out.Slices[i].Devices = make([]resourceapi.Device, len(s.Devices))
		for j, d := range s.Devices {
			// Deep copies: the slice controller rounds TimeAdded in place.
			d.Taints = nil
			for _, t := range taints[taintKey(d)] {
				d.Taints = append(d.Taints, *t.DeepCopy())
			}
			if key := taintKey(d); key != d.Name {
				// A MIG device's own taints: an XID inside its instance.
				for _, t := range taints[d.Name] {
					d.Taints = append(d.Taints, *t.DeepCopy())
				}
			}
			out.Slices[i].Devices[j] = d
		}
	}
	return out
}

// taintKey is the name a device's taints are kept under: its parent GPU's
// for a MIG device, its own otherwise.
func taintKey(d resourceapi.Device) string {
	if parent, ok := d.Attributes[names.AttrParentIndex]; ok && parent.IntValue != nil {
		return Name(int(*parent.IntValue))
	}
	return d.Name
}
