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

package burstfile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/contracttest"
)

// goldenFiles returns the files of testdata/golden by name: files the
// plugin writes.
func goldenFiles(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	files := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		files[filepath.Base(p)] = data
	}
	return files
}

// cGrants is what the library read, by GPU.
func cGrants(t *testing.T, lines []string) map[string]uint64 {
	t.Helper()
	grants := map[string]uint64{}
	for _, l := range lines {
		uuid, num, ok := strings.Cut(l, " ")
		require.True(t, ok, l)
		v, err := strconv.ParseUint(num, 10, 64)
		require.NoError(t, err)
		grants[uuid] = v
	}
	return grants
}

// The library reads exactly what the plugin writes, and refuses what the
// Go parser refuses: the two sides of host/burst agree on the golden and
// hostile files, on random files the plugin could write and on mutations.
func TestGoAndCParsersAgree(t *testing.T) {
	c := contracttest.Build(t)
	inputs := map[string][]byte{}
	for name, data := range goldenFiles(t) {
		inputs["golden/"+name] = data
	}
	for name, tc := range hostileFiles() {
		inputs["hostile/"+name] = []byte(tc.data)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 30 {
		grants := map[string]uint64{}
		for range rng.IntN(MaxGPUs + 1) {
			grants[fmt.Sprintf("GPU-%08x-%04x-0000-0000-000000000000", rng.Uint32(), rng.IntN(0x10000))] = rng.Uint64N(MaxGrantBytes + 1)
		}
		inputs[fmt.Sprintf("random %d", i)] = Render(grants)
	}
	valid := Render(map[string]uint64{uuid0: 3 * chunk, uuid1: 10})
	for i := range 200 {
		m := bytes.Clone(valid)
		m[rng.IntN(len(m))] = byte(rng.IntN(256))
		inputs[fmt.Sprintf("mutation %d", i)] = m
	}
	contracttest.Agree(t, c, "burstfile", inputs, Parse, cGrants)
}

// The limits are the header's.
func TestLimitsMatchCHeader(t *testing.T) {
	consts := contracttest.Build(t).Constants(t)
	assert.EqualValues(t, MaxBytes, consts["VGPU_BURST_MAX_BYTES"])
	assert.Equal(t, MaxGrantBytes, consts["VGPU_BURST_MAX_GRANT"])
	assert.EqualValues(t, MaxGPUs, consts["VGPU_BURST_MAX_GPUS"])
}

// The golden files are what the plugin writes.
func TestGoldenFilesRoundTrip(t *testing.T) {
	for name, data := range goldenFiles(t) {
		grants, err := Parse(data)
		require.NoError(t, err, name)
		assert.Equal(t, string(data), string(Render(grants)), name)
	}
}
