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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// These tests feed the config files the plugin really writes through
// libvgpu.so's own parser (vgpu-core/src/config.c, run by region-writer
// --check-config): a file the library cannot apply in full makes it fail
// every GPU of the container closed, so the plugin must never write one.

// coreDir is vgpu-core, relative to this package.
const coreDir = "../../../vgpu-core"

var checkTool struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// defaultSettings is what a claim without opaque config resolves to.
func defaultSettings() Settings {
	return Settings{ComputePolicy: api.DefaultComputePolicy, Priority: api.DefaultPriority,
		LogLevel: api.DefaultLogLevel, Enforcement: api.DefaultEnforcement}
}

// configChecker compiles region-writer once per test binary (TestMain
// removes it) and returns its path; tests skip without gcc (fail under CI).
func configChecker(t *testing.T) string {
	t.Helper()
	gcc := regiontest.Compiler(t, "the plugin's configs cannot be checked against libvgpu.so's parser")
	checkTool.once.Do(func() {
		checkTool.dir, checkTool.err = os.MkdirTemp("", "config-check-")
		if checkTool.err != nil {
			return
		}
		checkTool.path = filepath.Join(checkTool.dir, "region-writer")
		checkTool.out, checkTool.err = exec.Command(gcc, "-std=gnu11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
			"-I", filepath.Join(coreDir, "include"), "-I", filepath.Join(coreDir, "src"), "-o", checkTool.path,
			filepath.Join(coreDir, "tools", "region-writer.c"), filepath.Join(coreDir, "src", "parse.c"),
			filepath.Join(coreDir, "src", "config.c")).CombinedOutput()
	})
	require.NoError(t, checkTool.err, "compile vgpu-core/tools/region-writer.c: %s", checkTool.out)
	return checkTool.path
}

// checkConfig runs the library's parser on the file at path: nil if
// libvgpu.so applies all of it, else its "invalid claim config" line.
func checkConfig(t *testing.T, path string) error {
	t.Helper()
	out, err := exec.Command(configChecker(t), "--check-config", path).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return errors.New(strings.TrimSpace(string(out)))
	}
	require.NoError(t, err, "region-writer --check-config: %s", out)
	require.Empty(t, string(out), "a config the library accepts prints nothing")
	return nil
}

// checkBytes writes data to a file and checks it.
func checkBytes(t *testing.T, data []byte) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return checkConfig(t, path)
}

// manyGPUs is n GPUs of 16 GiB, gpu-00 .. gpu-<n-1>, in PCI bus order.
func manyGPUs(n int) map[string]discovery.Info {
	devs := map[string]discovery.Info{}
	for i := range n {
		devs[fmt.Sprintf("gpu-%02d", i)] = discovery.Info{
			UUID:        fmt.Sprintf("GPU-%08x-aaaa-bbbb-cccc-%012x", i, i),
			Index:       i,
			MemoryBytes: uint64(16 * gib),
			PCIBusID:    fmt.Sprintf("0000:%02x:00.0", 0x10+i),
		}
	}
	return devs
}

// claimOnGPUs asks for 1 GiB and 10 cores on each of the first n GPUs of manyGPUs.
// managerWithManyGPUs is a manager on a node with one GPU more than the
// config format holds, for plans at and past that limit.
func managerWithManyGPUs(t *testing.T) *Manager {
	t.Helper()
	configChecker(t)
	env := newTestEnv(t)
	opts := env.options()
	opts.Devices = manyGPUs(region.MaxDevices + 1)
	m, err := NewManager(testContext(t), opts)
	require.NoError(t, err)
	return m
}

func claimOnGPUs(n int) *resourceapi.ResourceClaim {
	b := newClaim(claimA, "wide")
	for i := range n {
		b.result(fmt.Sprintf("r%d", i), fmt.Sprintf("gpu-%02d", i), "1Gi", "10", "")
	}
	return b.obj()
}

// Every config the plugin writes on prepare, in every setting, is one the library applies in full.
func TestPreparedConfigPassesLibraryParser(t *testing.T) {
	configChecker(t)
	cases := map[string]*resourceapi.ResourceClaim{
		"two GPUs, class and claim settings": twoGPUClaim(claimA),
		"defaults":                           newClaim(claimA, "one").result("r", "gpu-0", "1", "0", "").obj(),
		"whole GPU, all cores":               newClaim(claimA, "all").result("r", "gpu-1", "80Gi", "100", "").obj(),
		"two shares of one GPU": newClaim(claimA, "shares").
			result("a", "gpu-0", "3Gi", "20", shareA).
			result("b", "gpu-0", "5Gi", "30", "5b000000-0000-4000-8000-00000000000b").obj(),
	}
	for _, policy := range []string{"strict", "workConserving", "disabled"} {
		for _, level := range []string{"error", "warning", "info", "debug"} {
			for _, enforcement := range []string{"enabled", "disabled"} {
				cases[policy+"/"+level+"/"+enforcement] = newClaim(claimA, "set").
					result("r", "gpu-0", "2Gi", "50", "").
					config(resourceapi.AllocationConfigSourceClass, nil, fmt.Sprintf(
						`"computePolicy":%q,"priority":"high","logLevel":%q,"enforcement":%q`, policy, level, enforcement)).
					obj()
			}
		}
	}
	for name, claim := range cases {
		t.Run(name, func(t *testing.T) {
			env := newTestEnv(t)
			prepareOne(t, env.newManager(t), claim)
			path := filepath.Join(env.stateRoot, "claims", string(claim.UID), "config")
			assert.NoError(t, checkConfig(t, path))
		})
	}
}

// As many GPUs as the format holds: planned, written, and applied by the library.
func TestPlanAtTheGPULimitPassesLibraryParser(t *testing.T) {
	m := managerWithManyGPUs(t)

	planned, err := m.plan(claimOnGPUs(region.MaxDevices))
	require.NoError(t, err)
	require.Len(t, planned.GPUs, region.MaxDevices)
	assert.NoError(t, checkBytes(t, renderConfig(planned, nil)))
}

// One GPU more than the format holds: the plan refuses the claim, naming the field,
// because the library would refuse the config (and fail the container closed).
func TestPlanRefusesMoreGPUsThanTheConfigHolds(t *testing.T) {
	m := managerWithManyGPUs(t)

	_, err := m.plan(claimOnGPUs(region.MaxDevices + 1))
	require.Error(t, err)
	var agg interface{ Errors() []error }
	require.ErrorAs(t, err, &agg)
	var fe *field.Error
	require.ErrorAs(t, agg.Errors()[0], &fe)
	assert.Equal(t, field.ErrorTypeTooMany, fe.Type)
	assert.Equal(t, "status.allocation.devices.results", fe.Field)
	assert.Contains(t, fe.Detail, fmt.Sprintf("at most %d", region.MaxDevices))

	// The limits agree: what the plan refuses, the library refuses too.
	over := &PreparedClaim{UID: types.UID(claimA), Settings: defaultSettings()}
	for _, g := range manyGPUs(region.MaxDevices + 1) {
		over.GPUs = append(over.GPUs, GPULimit{UUID: g.UUID, MemoryLimitBytes: uint64(gib)})
	}
	assert.ErrorContains(t, checkBytes(t, renderConfig(over, nil)), "invalid claim config")
}

// A GPU whose UUID the library would not accept is refused at plan time, on its device field.
func TestPlanRefusesUUIDTheConfigCannotHold(t *testing.T) {
	configChecker(t)
	env := newTestEnv(t)
	opts := env.options()
	opts.Devices = map[string]discovery.Info{
		"gpu-0": {UUID: "GPU-00000000-1111-2222-3333-444444444444 ", Index: 0, MemoryBytes: uint64(80 * gib), PCIBusID: "0000:3b:00.0"},
	}
	m, err := NewManager(testContext(t), opts)
	require.NoError(t, err)

	_, err = m.plan(newClaim(claimA, "bad").result("r", "gpu-0", "1Gi", "0", "").obj())
	require.Error(t, err)
	var agg interface{ Errors() []error }
	require.ErrorAs(t, err, &agg)
	var fe *field.Error
	require.ErrorAs(t, agg.Errors()[0], &fe)
	assert.Equal(t, field.ErrorTypeInvalid, fe.Type)
	assert.Equal(t, "status.allocation.devices.results[0].device", fe.Field)

	// The library refuses that UUID too.
	bad := &PreparedClaim{UID: types.UID(claimA), Settings: defaultSettings(),
		GPUs: []GPULimit{{UUID: opts.Devices["gpu-0"].UUID, MemoryLimitBytes: uint64(gib)}}}
	assert.ErrorContains(t, checkBytes(t, renderConfig(bad, nil)), "invalid claim config")
}

// An MPS claim's config on an r615+ driver carries mps.driverMemoryLimit
// beside the pair the library needs for it, and the library applies it; a
// limit below the 1 MiB the driver can hold gets no line (the library
// would refuse one).
func TestMPSDriverMemoryLimitPassesLibraryParser(t *testing.T) {
	configChecker(t)
	memAcct := func(gpu string) bool { return gpu == uuid0 }
	for name, tc := range map[string]struct {
		limit uint64
		line  bool
	}{
		"8Gi":       {uint64(8 * gib), true},
		"1Mi":       {1 << 20, true},
		"below 1Mi": {1<<20 - 1, false},
		"no memory": {0, false},
	} {
		t.Run(name, func(t *testing.T) {
			c := &PreparedClaim{UID: types.UID(claimA), Settings: defaultSettings(), GPUs: []GPULimit{
				{UUID: uuid0, MemoryLimitBytes: tc.limit, SMLimitPercent: 30, MPS: true},
				{UUID: uuid1, MemoryLimitBytes: uint64(gib), SMLimitPercent: 10},
			}}
			text := string(renderConfig(c, memAcct))
			want := fmt.Sprintf("mps.driverMemoryLimit.0=%d\n", tc.limit)
			if tc.line {
				assert.Contains(t, text, want)
			} else {
				assert.NotContains(t, text, "mps.driverMemoryLimit")
			}
			assert.NotContains(t, text, "mps.driverMemoryLimit.1", "only MPS devices")
			assert.NoError(t, checkBytes(t, []byte(text)))
		})
	}
}

// The checker is the library's parser, not a rubber stamp: lines it cannot apply fail.
func TestConfigCheckerRefusesWhatTheLibraryRefuses(t *testing.T) {
	configChecker(t)
	good := string(renderConfig(&PreparedClaim{UID: types.UID(claimA), Settings: defaultSettings(),
		GPUs: []GPULimit{{UUID: uuid0, MemoryLimitBytes: uint64(gib), SMLimitPercent: 10}}}, nil))
	require.NoError(t, checkBytes(t, []byte(good)))
	for name, text := range map[string]string{
		"trailing space in UUID":  strings.Replace(good, uuid0, uuid0+" ", 1),
		"index with leading zero": strings.Replace(good, "device.0.sm_limit_percent", "device.00.sm_limit_percent", 1),
		"embedded NUL":            strings.Replace(good, "priority=low", "priority=low\x00", 1),
		"non-ASCII":               strings.Replace(good, "claim="+claimA, "claim="+claimA+"\u00e9", 1),
		"over the size limit":     good + strings.Repeat("# padding\n", 7000),
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorContains(t, checkBytes(t, []byte(text)), "invalid claim config")
		})
	}
}

// removeCheckTool deletes the region-writer build, once the tests are done.
func removeCheckTool() {
	if checkTool.dir != "" {
		_ = os.RemoveAll(checkTool.dir)
	}
}
