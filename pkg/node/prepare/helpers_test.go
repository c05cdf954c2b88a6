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

package prepare

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/claimcdi"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const (
	driverName = "vgpu.dra.dev"
	nodeName   = "node-a"
	gib        = int64(1) << 30

	uuid0 = "GPU-00000000-1111-2222-3333-444444444444"
	uuid1 = "GPU-55555555-6666-7777-8888-999999999999"
)

// testDevices are two 80 GiB GPUs; gpu-1 sits on the lower PCI bus, so a
// claim on both lists gpu-1 first.
func testDevices() map[string]discovery.Info {
	return map[string]discovery.Info{
		"gpu-0": {UUID: uuid0, Index: 0, MemoryBytes: uint64(80 * gib), PCIBusID: "0000:3b:00.0"},
		"gpu-1": {UUID: uuid1, Index: 1, MemoryBytes: uint64(80 * gib), PCIBusID: "0000:1a:00.0"},
	}
}

// testEnv is one node's directories; managers created from it share them,
// the way a restarted plugin finds its predecessor's files.
type testEnv struct {
	stateRoot  string
	cdiRoot    string
	vendorDir  string
	bootIDPath string
	libVGPU    string
	edits      *failingEdits
}

func newTestEnv(t testing.TB) *testEnv {
	root := t.TempDir()
	env := &testEnv{
		stateRoot:  filepath.Join(root, "state"),
		cdiRoot:    filepath.Join(root, "run-cdi"),
		vendorDir:  filepath.Join(root, "etc-cdi"),
		bootIDPath: filepath.Join(root, "boot_id"),
		libVGPU:    "/usr/local/vgpu/libvgpu.so",
	}
	require.NoError(t, os.MkdirAll(env.vendorDir, 0o755))
	sharedMount(t, env.stateRoot)
	env.setBootID(t, "boot-1")
	writeVendorSpec(t, env.vendorDir)
	src, err := claimcdi.NewSpecDirSource(claimcdi.DefaultVendorKind, []string{env.vendorDir})
	require.NoError(t, err)
	env.edits = &failingEdits{source: src, fail: map[string]error{}}
	return env
}

func (e *testEnv) setBootID(t testing.TB, id string) {
	require.NoError(t, os.WriteFile(e.bootIDPath, []byte(id+"\n"), 0o644))
}

func (e *testEnv) options() Options {
	return Options{
		DriverName:  driverName,
		NodeName:    nodeName,
		StateRoot:   e.stateRoot,
		CDIRoot:     e.cdiRoot,
		LibVGPUPath: e.libVGPU,
		Devices:     testDevices(),
		GPUEdits:    e.edits,
		BootIDPath:  e.bootIDPath,
	}
}

func (e *testEnv) newManager(t testing.TB) *Manager {
	m, err := NewManager(testContext(t), e.options())
	require.NoError(t, err)
	return m
}

func testContext(t testing.TB) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

// writeVendorSpec writes the node's vendor spec, as nvidia-ctk would with
// the uuid device-name strategy.
func writeVendorSpec(t testing.TB, dir string) {
	spec := cdispec.Spec{
		Version: "0.6.0",
		Kind:    claimcdi.DefaultVendorKind,
		Devices: []cdispec.Device{
			{Name: uuid0, ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0}}}},
			{Name: uuid1, ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia1", Type: "c", Major: 195, Minor: 1}}}},
		},
		// Device numbers are given so that injecting needs no real nodes.
		ContainerEdits: cdispec.ContainerEdits{
			Env:         []string{"NVIDIA_VISIBLE_DEVICES=void"},
			DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidiactl", Type: "c", Major: 195, Minor: 255}},
			Hooks:       []*cdispec.Hook{{HookName: "createContainer", Path: "/usr/bin/nvidia-cdi-hook", Args: []string{"nvidia-cdi-hook", "update-ldcache"}}},
		},
	}
	data, err := json.Marshal(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia.json"), data, 0o644))
}

// failingEdits wraps a real source and fails for chosen UUIDs.
type failingEdits struct {
	source claimcdi.GPUEditsSource
	mu     sync.Mutex
	fail   map[string]error
}

func (f *failingEdits) ContainerEdits(ctx context.Context, uuid string) (*claimcdi.GPUEdits, error) {
	f.mu.Lock()
	err := f.fail[uuid]
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.source.ContainerEdits(ctx, uuid)
}

func (f *failingEdits) clearFailures() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.fail)
}

func (f *failingEdits) failFor(uuid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[uuid] = errors.New("GPU is gone")
}

// claimBuilder builds allocated ResourceClaims.
type claimBuilder struct {
	claim *resourceapi.ResourceClaim
}

func newClaim(uid, name string) *claimBuilder {
	return &claimBuilder{claim: &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid)},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}}
}

// result adds an allocation result of this driver; empty memory or cores
// leave that capacity out.
func (b *claimBuilder) result(request, device, memory, cores, shareID string) *claimBuilder {
	r := resourceapi.DeviceRequestAllocationResult{
		Request: request, Driver: driverName, Pool: nodeName, Device: device,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{},
	}
	if memory != "" {
		r.ConsumedCapacity[capacityMemory] = resource.MustParse(memory)
	}
	if cores != "" {
		r.ConsumedCapacity[capacityCores] = resource.MustParse(cores)
	}
	if shareID != "" {
		id := types.UID(shareID)
		r.ShareID = &id
	}
	b.claim.Status.Allocation.Devices.Results = append(b.claim.Status.Allocation.Devices.Results, r)
	return b
}

func (b *claimBuilder) modify(fn func(*resourceapi.ResourceClaim)) *claimBuilder {
	fn(b.claim)
	return b
}

// config adds an opaque config of this driver with the given VGPUConfig
// fields (JSON members without braces).
func (b *claimBuilder) config(source resourceapi.AllocationConfigSource, requests []string, fields string) *claimBuilder {
	raw := `{"apiVersion":"vgpu.dra.dev/v1alpha1","kind":"VGPUConfig"`
	if fields != "" {
		raw += "," + fields
	}
	raw += "}"
	b.claim.Status.Allocation.Devices.Config = append(b.claim.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
		Source:   source,
		Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(raw)},
		}},
	})
	return b
}

func (b *claimBuilder) obj() *resourceapi.ResourceClaim { return b.claim }

// readSpec parses the claim's CDI spec back with the CDI library.
func readSpec(t testing.TB, e *testEnv, uid string) *cdi.Spec {
	path := filepath.Join(e.cdiRoot, cdi.GenerateTransientSpecName(claimcdi.Vendor, claimcdi.Class, uid)+".json")
	spec, err := cdi.ReadSpec(path, 0)
	require.NoError(t, err)
	return spec
}

// diskState describes what exists on disk for a claim.
type diskState struct {
	claimDir, config, region, spec bool
	// regionFS: the claim's region file system is mounted (and, when
	// region is set, holds the region).
	regionFS bool
	state    claimState // "" when not in the checkpoint
}

func (e *testEnv) diskState(t testing.TB, uid string) diskState {
	exists := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}
	l := layout{stateRoot: e.stateRoot}
	u := types.UID(uid)
	s := diskState{
		claimDir: exists(l.claimDir(u)),
		config:   exists(l.configPath(u)),
		region:   exists(l.regionPath(u)),
		spec:     exists(filepath.Join(e.cdiRoot, cdi.GenerateTransientSpecName(claimcdi.Vendor, claimcdi.Class, uid)+".json")),
	}
	for _, p := range mountsUnder(t, l.claimDir(u)) {
		require.Equal(t, l.shmDir(u), p, "the only mount of a claim is its region file system")
		require.NoError(t, checkRegionFS(p))
		require.False(t, s.regionFS, "one region file system per claim")
		s.regionFS = true
	}
	cp, err := loadCheckpoint(l.checkpointPath())
	require.NoError(t, err)
	if rec, ok := cp.Claims[u]; ok {
		s.state = rec.State
	}
	return s
}

var (
	absent   = diskState{}
	prepared = diskState{claimDir: true, config: true, region: true, spec: true, regionFS: true, state: statePrepareCompleted}
)
