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

package hostpids

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/contracttest"
)

// testFiles returns the files of testdata/<dir> by name.
func testFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	require.NoError(t, err)
	require.NotEmpty(t, paths, "testdata/%s", dir)
	files := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		files[filepath.Base(p)] = data
	}
	return files
}

// manyEntries is a map of n processes.
func manyEntries(n int) []Entry {
	entries := make([]Entry, n)
	for i := range entries {
		entries[i] = Entry{PIDNamespace: 4026532000, PID: uint32(i + 1), StartTime: uint64(1000 + i), HostPID: uint32(5000 + i)}
	}
	return entries
}

// cEntries is what the library read, in the Go type.
func cEntries(t *testing.T, lines []string) []Entry {
	t.Helper()
	var out []Entry
	for _, l := range lines {
		var e Entry
		_, err := fmt.Sscanf(l, "%d %d %d %d", &e.PIDNamespace, &e.PID, &e.StartTime, &e.HostPID)
		require.NoError(t, err, "contract-parse line %q", l)
		out = append(out, e)
	}
	return out
}

// The library and the plugin read every golden and hostile map alike:
// both accept it with the same entries, or both refuse it.
func TestGoAndCParsersAgree(t *testing.T) {
	c := contracttest.Build(t)
	inputs := map[string][]byte{}
	for name, data := range testFiles(t, "golden") {
		inputs["golden/"+name] = data
	}
	for name, data := range testFiles(t, "hostile") {
		inputs["hostile/"+name] = data
	}
	inputs["MaxEntries"] = Render(manyEntries(MaxEntries))
	inputs["one over MaxEntries"] = Render(manyEntries(MaxEntries + 1))
	inputs["over MaxBytes"] = append([]byte(header), bytes.Repeat([]byte("1"), MaxBytes)...)
	rng := rand.New(rand.NewPCG(3, 4))
	valid := testFiles(t, "golden")["processes"]
	for i := range 300 {
		m := bytes.Clone(valid)
		m[rng.IntN(len(m))] = byte(rng.IntN(256))
		inputs[fmt.Sprintf("mutation %d", i)] = m
	}
	contracttest.Agree(t, c, "hostpids", inputs, Parse, cEntries)
}

// The limits are the header's.
func TestLimitsMatchCHeader(t *testing.T) {
	consts := contracttest.Build(t).Constants(t)
	assert.EqualValues(t, MaxEntries, consts["VGPU_HOSTPIDS_MAX"])
	assert.EqualValues(t, MaxBytes, consts["VGPU_HOSTPIDS_MAX_BYTES"])
	assert.EqualValues(t, MaxPID, consts["VGPU_PID_MAX"])
}

// What the plugin writes, it reads back; the golden files are what it writes.
func TestRenderRoundTrip(t *testing.T) {
	for name, data := range testFiles(t, "golden") {
		entries, err := Parse(data)
		require.NoError(t, err, name)
		assert.Equal(t, string(data), string(Render(entries)), name)
	}
	entries := manyEntries(MaxEntries)
	got, err := Parse(Render(entries))
	require.NoError(t, err)
	assert.ElementsMatch(t, entries, got)
}

func TestParseNamesTheLine(t *testing.T) {
	_, err := Parse([]byte("version=1\n1 2 3 4\n1 2 3\n"))
	assert.ErrorContains(t, err, "line 3")
	_, err = Parse([]byte("version=2\n"))
	assert.ErrorContains(t, err, "line 1")
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pids")
	require.NoError(t, os.WriteFile(path, Render(manyEntries(2)), 0o644))
	got, err := ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, manyEntries(2), got)

	require.NoError(t, os.WriteFile(path, append(Render(nil), bytes.Repeat([]byte("#"), MaxBytes)...), 0o644))
	_, err = ReadFile(path)
	assert.ErrorContains(t, err, "larger than")

	_, err = ReadFile(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
