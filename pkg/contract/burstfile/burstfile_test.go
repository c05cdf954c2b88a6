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
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	mib   = uint64(1) << 20
	uuid0 = "GPU-11111111-2222-3333-4444-555555555555"
	uuid1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	// chunk is a grant the plugin's grant book hands out (256 MiB).
	chunk = 256 * mib
)

func TestRenderAndParse(t *testing.T) {
	grants := map[string]uint64{uuid1: 0, uuid0: 3 * chunk}
	data := Render(grants)
	assert.Equal(t, "version=1\ngpu "+uuid0+" 805306368\ngpu "+uuid1+" 0\n", string(data), "sorted by UUID")
	got, err := Parse(data)
	require.NoError(t, err)
	assert.Equal(t, grants, got)

	got, err = Parse(Render(nil))
	require.NoError(t, err)
	assert.Empty(t, got)

	// As many GPUs as a claim holds.
	many := map[string]uint64{}
	for i := range MaxGPUs {
		many[fmt.Sprintf("GPU-%08x-0000-0000-0000-000000000000", i)] = MaxGrantBytes
	}
	got, err = Parse(Render(many))
	require.NoError(t, err)
	assert.Equal(t, many, got)
}

// hostileFiles are host/burst files the parsers must refuse, by name, with
// a part of the Go parser's reason.
func hostileFiles() map[string]struct{ data, err string } {
	line := "gpu " + uuid0 + " 268435456\n"
	tooMany := "version=1\n"
	for i := range MaxGPUs + 1 {
		tooMany += fmt.Sprintf("gpu GPU-%08x-0000-0000-0000-000000000000 0\n", i)
	}
	return map[string]struct{ data, err string }{
		"empty":                    {"", "empty"},
		"no final newline":         {"version=1\n" + strings.TrimSuffix(line, "\n"), "newline"},
		"garbage":                  {"\x00\xff\xfe garbage\n", "first line"},
		"other version":            {"version=2\n" + line, `"version=2"`},
		"version with spaces":      {"version = 1\n" + line, "first line"},
		"no version":               {line, "first line"},
		"empty line":               {"version=1\n\n" + line, "line 2"},
		"carriage return":          {"version=1\r\n" + line, "first line"},
		"CR in a grant line":       {"version=1\ngpu " + uuid0 + " 1\r\n", "line 2"},
		"tab separator":            {"version=1\ngpu\t" + uuid0 + "\t1\n", "line 2"},
		"double space":             {"version=1\ngpu  " + uuid0 + " 1\n", "line 2"},
		"trailing space":           {"version=1\n" + strings.TrimSuffix(line, "\n") + " \n", "line 2"},
		"extra field":              {"version=1\ngpu " + uuid0 + " 1 2\n", "line 2"},
		"wrong keyword":            {"version=1\nGPU " + uuid0 + " 1\n", "line 2"},
		"bad UUID":                 {"version=1\ngpu GPU-1234 1\n", "not a GPU UUID"},
		"UUID of another form":     {"version=1\ngpu CPU-11111111-2222-3333-4444-555555555555 1\n", "not a GPU UUID"},
		"pre-R470 MIG form":        {"version=1\ngpu MIG-GPU-11111111-2222-3333-4444-555555555555/1/0 1\n", "not a GPU UUID"},
		"negative":                 {"version=1\ngpu " + uuid0 + " -268435456\n", "not a decimal number"},
		"plus sign":                {"version=1\ngpu " + uuid0 + " +1\n", "not a decimal number"},
		"leading zero":             {"version=1\ngpu " + uuid0 + " 0268435456\n", "not a decimal number"},
		"hex":                      {"version=1\ngpu " + uuid0 + " 0x10000000\n", "not a decimal number"},
		"unit":                     {"version=1\ngpu " + uuid0 + " 256Mi\n", "not a decimal number"},
		"empty number":             {"version=1\ngpu " + uuid0 + " \n", "not a decimal number"},
		"beyond MaxGrantBytes":     {fmt.Sprintf("version=1\ngpu %s %d\n", uuid0, MaxGrantBytes+1), "more than"},
		"uint64 overflow":          {"version=1\ngpu " + uuid0 + " 18446744073709551616\n", "more than"},
		"huge number":              {"version=1\ngpu " + uuid0 + " " + strings.Repeat("9", 200) + "\n", "not a decimal number"},
		"duplicate GPU":            {"version=1\n" + line + "gpu " + uuid0 + " 0\n", "listed twice"},
		"duplicate GPU other case": {"version=1\ngpu " + uuid1 + " 0\ngpu " + strings.ToUpper(uuid1) + " 268435456\n", "listed twice"},
		"more GPUs than a claim":   {tooMany, fmt.Sprintf("more than %d GPUs", MaxGPUs)},
		"huge file":                {"version=1\n" + strings.Repeat(line, 100), "more than 4096"},
		"NUL in a line":            {"version=1\ngpu " + uuid0 + " 1\x00\n", "line 2"},
	}
}

// Any deviation refuses the whole file: a partial parse could give a
// claim a grant the plugin's grant book does not count.
func TestParseRefusesHostileInput(t *testing.T) {
	for name, tc := range hostileFiles() {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
			assert.Nil(t, got, "nothing of a refused file is used")
			assert.Less(t, len(err.Error()), 300, "hostile input is not echoed at length")
		})
	}
}

// FuzzParse: the parser never panics, what it accepts is within the
// bounds and renders back to a file it accepts with the same grants.
func FuzzParse(f *testing.F) {
	f.Add(Render(map[string]uint64{uuid0: chunk, uuid1: 0}))
	f.Add([]byte("version=1\n"))
	f.Add([]byte("version=1\ngpu " + uuid0 + " 00\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		grants, err := Parse(data)
		if err != nil {
			require.Nil(t, grants)
			return
		}
		require.LessOrEqual(t, len(grants), MaxGPUs)
		for uuid, v := range grants {
			require.LessOrEqual(t, v, MaxGrantBytes)
			require.Regexp(t, gpuUUID, uuid)
		}
		again, err := Parse(Render(grants))
		require.NoError(t, err)
		require.Equal(t, grants, again)
	})
}
