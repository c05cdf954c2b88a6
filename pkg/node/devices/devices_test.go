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
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"

	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
	// h100Memory is what NVML reports for an H100 80GB: 81559 MiB.
	h100Memory = uint64(81559 * mi)
)

func h100(index int) discovery.Info {
	return discovery.Info{
		UUID:                  fmt.Sprintf("GPU-%08x-1111-2222-3333-444455556666", index),
		Index:                 index,
		Minor:                 index,
		ProductName:           "NVIDIA H100 80GB HBM3",
		Brand:                 "NVIDIA",
		Architecture:          "Hopper",
		CUDAComputeCapability: "9.0",
		DriverVersion:         "580.95.05",
		CUDADriverVersion:     "12.9",
		MemoryBytes:           h100Memory,
		PCIBusID:              fmt.Sprintf("0000:%02x:00.0", 0x18+index),
		NUMANode:              index / 4,
		Multiprocessors:       132,
	}
}

// fakeSysfs lays out bus/pci/devices/<bus id> as a symlink into the device
// tree below a root complex, the way Linux does.
func fakeSysfs(t *testing.T, busID, root string) string {
	t.Helper()
	dir := t.TempDir()
	devDir := filepath.Join(dir, "devices", root, "0000:16:01.0", busID)
	require.NoError(t, os.MkdirAll(devDir, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bus", "pci", "devices"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join("..", "..", "..", "devices", root, "0000:16:01.0", busID),
		filepath.Join(dir, "bus", "pci", "devices", busID)))
	return dir
}

func TestDevice(t *testing.T) {
	info := h100(0)
	sysfs := fakeSysfs(t, info.PCIBusID, "pci0000:15")
	dev := Device(info, Options{SysfsRoot: sysfs})

	assert.Equal(t, "gpu-0", dev.Name)
	assert.Equal(t, ptr.To(true), dev.AllowMultipleAllocations)
	assert.Equal(t, map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"uuid":                            {StringValue: ptr.To(info.UUID)},
		"index":                           {IntValue: ptr.To[int64](0)},
		"minor":                           {IntValue: ptr.To[int64](0)},
		"productName":                     {StringValue: ptr.To("NVIDIA H100 80GB HBM3")},
		"brand":                           {StringValue: ptr.To("NVIDIA")},
		"architecture":                    {StringValue: ptr.To("Hopper")},
		"cudaComputeCapability":           {VersionValue: ptr.To("9.0.0")},
		"driverVersion":                   {VersionValue: ptr.To("580.95.5")},
		"cudaDriverVersion":               {VersionValue: ptr.To("12.9.0")},
		"pcieBusID":                       {StringValue: ptr.To("0000:18:00.0")},
		"resource.kubernetes.io/pcieRoot": {StringValue: ptr.To("pci0000:15")},
		"numaNode":                        {IntValue: ptr.To[int64](0)},
		"multiprocessors":                 {IntValue: ptr.To[int64](132)},
	}, dev.Attributes)

	memory := dev.Capacity["memory"]
	assertQuantity(t, 81559*mi, memory.Value)
	require.NotNil(t, memory.RequestPolicy)
	assertQuantity(t, 81559*mi, *memory.RequestPolicy.Default)
	assertQuantity(t, 256*mi, *memory.RequestPolicy.ValidRange.Min)
	assertQuantity(t, 81559*mi, *memory.RequestPolicy.ValidRange.Max)
	assertQuantity(t, mi, *memory.RequestPolicy.ValidRange.Step)

	cores := dev.Capacity["cores"]
	assertQuantity(t, 100, cores.Value)
	assertQuantity(t, 0, *cores.RequestPolicy.Default)
	assertQuantity(t, 0, *cores.RequestPolicy.ValidRange.Min)
	assertQuantity(t, 100, *cores.RequestPolicy.ValidRange.Max)
	assertQuantity(t, 1, *cores.RequestPolicy.ValidRange.Step)

	assert.Empty(t, validateDevice(dev))
}

func TestDeviceOmitsUnknown(t *testing.T) {
	info := h100(1)
	info.NUMANode = -1
	info.Multiprocessors = 0
	info.DriverVersion = "r580-beta"
	// No sysfs entry: a simulated GPU or a container without /sys.
	dev := Device(info, Options{SysfsRoot: t.TempDir()})
	for _, name := range []resourceapi.QualifiedName{"numaNode", "multiprocessors", "driverVersion", names.AttrPCIeRoot} {
		assert.NotContains(t, dev.Attributes, name)
	}
	assert.Contains(t, dev.Attributes, resourceapi.QualifiedName("cudaDriverVersion"))
	assert.Empty(t, validateDevice(dev))
}

func TestMemoryRounding(t *testing.T) {
	tests := []struct {
		name                 string
		total                uint64
		opts                 Options
		value, minimum, step int64
		wholeOnly            bool
	}{
		{name: "exact GiB", total: uint64(80 * gi), value: 80 * gi, minimum: 256 * mi, step: mi},
		{name: "odd bytes round down to MiB", total: uint64(80*gi + 12345), value: 80 * gi, minimum: 256 * mi, step: mi},
		{name: "H100", total: h100Memory, value: 81559 * mi, minimum: 256 * mi, step: mi},
		{
			name: "256Mi step", total: h100Memory, opts: Options{MemoryStep: 256 * mi},
			value: 318 * 256 * mi, minimum: 256 * mi, step: 256 * mi,
		},
		{
			// 100M does not divide 256Mi: the value is min + n*step.
			name: "decimal step", total: uint64(10 * gi), opts: Options{MemoryStep: 100_000_000},
			value: 256*mi + 104*100_000_000, minimum: 256 * mi, step: 100_000_000,
		},
		{
			name: "custom min", total: uint64(16 * gi), opts: Options{MemoryMin: gi, MemoryStep: 64 * mi},
			value: 16 * gi, minimum: gi, step: 64 * mi,
		},
		{name: "too small to share", total: uint64(200 * mi), value: 200 * mi, wholeOnly: true},
		{name: "no memory", total: 0, value: 0, wholeOnly: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info := h100(0)
			info.MemoryBytes = tc.total
			dev := Device(info, tc.opts)
			memory := dev.Capacity["memory"]
			assertQuantity(t, tc.value, memory.Value)
			assertQuantity(t, tc.value, *memory.RequestPolicy.Default)
			assertQuantity(t, tc.value, *memory.RequestPolicy.ValidRange.Max)
			if tc.wholeOnly {
				assertQuantity(t, tc.value, *memory.RequestPolicy.ValidRange.Min)
				assert.Nil(t, memory.RequestPolicy.ValidRange.Step)
			} else {
				assertQuantity(t, tc.minimum, *memory.RequestPolicy.ValidRange.Min)
				assertQuantity(t, tc.step, *memory.RequestPolicy.ValidRange.Step)
			}
			assert.LessOrEqual(t, uint64(tc.value), tc.total, "never publish more than the GPU has")
			assert.Empty(t, validateDevice(dev))
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	assert.NoError(t, Options{}.Validate())
	assert.NoError(t, Options{MemoryStep: 2 * mi, MemoryMin: gi}.Validate())
	err := Options{MemoryStep: -1, MemoryMin: -2}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "memory step -1")
	assert.Contains(t, err.Error(), "memory minimum -2")
	// Device never publishes an invalid policy, even from unchecked options.
	assert.Empty(t, validateDevice(Device(h100(0), Options{MemoryStep: -1, MemoryMin: -2})))
}

func TestSemVer(t *testing.T) {
	for in, want := range map[string]string{
		"9.0": "9.0.0", "12.9": "12.9.0", "580.95.05": "580.95.5", "550": "550.0.0", "535.104.05": "535.104.5",
	} {
		got, ok := SemVer(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "1.2.3.4", "r535", "1..2", "1.-2", "1.2b", "99999999999999999999999"} {
		_, ok := SemVer(bad)
		assert.False(t, ok, bad)
	}
}

func TestPool(t *testing.T) {
	empty := Pool(nil, Options{})
	require.Len(t, empty.Slices, 1, "a node without GPUs still publishes one empty slice")
	assert.Empty(t, empty.Slices[0].Devices)

	infos := make([]discovery.Info, resourceapi.ResourceSliceMaxDevices+2)
	for i := range infos {
		infos[i] = h100(i)
	}
	pool := Pool(infos, Options{})
	require.Len(t, pool.Slices, 2)
	assert.Len(t, pool.Slices[0].Devices, resourceapi.ResourceSliceMaxDevices)
	assert.Len(t, pool.Slices[1].Devices, 2)
	assert.Equal(t, "gpu-0", pool.Slices[0].Devices[0].Name)
	assert.Equal(t, "gpu-129", pool.Slices[1].Devices[1].Name)

	res := DriverResources("node-a", infos[:2], Options{})
	require.Contains(t, res.Pools, "node-a")
	assert.Len(t, res.Pools["node-a"].Slices[0].Devices, 2)
}

func assertQuantity(t *testing.T, want int64, got resource.Quantity) {
	t.Helper()
	assert.Equal(t, want, got.Value(), "quantity %s", got.String())
}

var (
	cIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// semverPattern is semantic versioning 2.0.0 as the API accepts it.
	semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
)

// validateDevice checks the rules of the resource.k8s.io/v1 API validation
// that a published device can break (k8s.io/kubernetes, which holds the
// real validation, is not a dependency of this module).
func validateDevice(dev resourceapi.Device) []string {
	var errs []string
	for _, msg := range validation.IsDNS1123Label(dev.Name) {
		errs = append(errs, "name: "+msg)
	}
	if n := len(dev.Attributes) + len(dev.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		errs = append(errs, fmt.Sprintf("%d attributes and capacities, limit %d", n, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice))
	}
	for name, attr := range dev.Attributes {
		errs = append(errs, validateQualifiedName(name)...)
		set := 0
		if attr.IntValue != nil {
			set++
		}
		if attr.BoolValue != nil {
			set++
		}
		if attr.StringValue != nil {
			set++
			if len(*attr.StringValue) > resourceapi.DeviceAttributeMaxValueLength {
				errs = append(errs, fmt.Sprintf("attribute %s: string too long", name))
			}
		}
		if attr.VersionValue != nil {
			set++
			if !semverPattern.MatchString(*attr.VersionValue) || len(*attr.VersionValue) > resourceapi.DeviceAttributeMaxValueLength {
				errs = append(errs, fmt.Sprintf("attribute %s: %q is not a semantic version", name, *attr.VersionValue))
			}
		}
		if set != 1 {
			errs = append(errs, fmt.Sprintf("attribute %s: %d values set, want exactly 1", name, set))
		}
	}
	for name, capacity := range dev.Capacity {
		errs = append(errs, validateQualifiedName(name)...)
		errs = append(errs, validateCapacity(name, capacity, dev.AllowMultipleAllocations)...)
	}
	return errs
}

func validateQualifiedName(name resourceapi.QualifiedName) []string {
	domain, id := "", string(name)
	if i := regexp.MustCompile(`/`).FindStringIndex(id); i != nil {
		domain, id = id[:i[0]], id[i[1]:]
	}
	var errs []string
	if domain != "" {
		if len(domain) > resourceapi.DeviceMaxDomainLength {
			errs = append(errs, fmt.Sprintf("%s: domain too long", name))
		}
		for _, msg := range validation.IsDNS1123Subdomain(domain) {
			errs = append(errs, fmt.Sprintf("%s: %s", name, msg))
		}
	}
	if len(id) > resourceapi.DeviceMaxIDLength || !cIdentifier.MatchString(id) {
		errs = append(errs, fmt.Sprintf("%s: %q is not a C identifier of at most %d characters", name, id, resourceapi.DeviceMaxIDLength))
	}
	return errs
}

func validateCapacity(name resourceapi.QualifiedName, c resourceapi.DeviceCapacity, multi *bool) []string {
	p := c.RequestPolicy
	if p == nil {
		return nil
	}
	var errs []string
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Sprintf("capacity %s: ", name)+fmt.Sprintf(format, args...))
	}
	if multi == nil || !*multi {
		fail("requestPolicy needs allowMultipleAllocations")
	}
	value := c.Value.Value()
	if p.Default == nil {
		fail("default required")
		return errs
	}
	def := p.Default.Value()
	r := p.ValidRange
	if r == nil {
		return errs
	}
	if r.Min == nil {
		fail("validRange.min required")
		return errs
	}
	minimum := r.Min.Value()
	if minimum < 0 || minimum > value {
		fail("min %d outside 0..value %d", minimum, value)
	}
	if def < minimum {
		fail("default %d below min %d", def, minimum)
	}
	if r.Max != nil {
		maximum := r.Max.Value()
		if maximum > value || maximum < minimum || def > maximum {
			fail("max %d inconsistent with min %d, default %d, value %d", maximum, minimum, def, value)
		}
	}
	if r.Step != nil {
		step := r.Step.Value()
		if step <= 0 || minimum+step > value {
			fail("step %d: min+step exceeds value %d", step, value)
			return errs
		}
		if (def-minimum)%step != 0 {
			fail("default %d is not min %d + n*step %d", def, minimum, step)
		}
		if r.Max != nil && (r.Max.Value()-minimum)%step != 0 {
			fail("max %d is not min %d + n*step %d", r.Max.Value(), minimum, step)
		}
	}
	return errs
}

// TestValidateDeviceCatchesBadPolicies proves the checker above can fail.
func TestValidateDeviceCatchesBadPolicies(t *testing.T) {
	tests := map[string]func(dev *resourceapi.Device){
		"max off step": func(dev *resourceapi.Device) {
			dev.Capacity["memory"].RequestPolicy.ValidRange.Min = ptr.To(resource.MustParse("1000001Ki"))
		},
		"version not semver": func(dev *resourceapi.Device) {
			dev.Attributes["driverVersion"] = resourceapi.DeviceAttribute{VersionValue: ptr.To("580.95.05")}
		},
		"bad attribute name": func(dev *resourceapi.Device) {
			dev.Attributes["bad name"] = resourceapi.DeviceAttribute{StringValue: ptr.To("x")}
		},
		"two values": func(dev *resourceapi.Device) {
			dev.Attributes["index"] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1), StringValue: ptr.To("1")}
		},
		"not shareable": func(dev *resourceapi.Device) { dev.AllowMultipleAllocations = nil },
	}
	for name, breakIt := range tests {
		t.Run(name, func(t *testing.T) {
			dev := Device(h100(0), Options{})
			breakIt(&dev)
			assert.NotEmpty(t, validateDevice(dev))
		})
	}
}
