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

package burst

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

// coreDir is vgpu-core, relative to this package.
const coreDir = "../../../vgpu-core"

// cParser is a C program that parses the file on stdin with the library's
// parser and prints "ok" and one "<uuid> <bytes>" line per GPU, or "refused".
const cParser = `#include <stdio.h>
#include <unistd.h>
#include "burstfile.h"
int main(void)
{
    static char buf[VGPU_BURST_MAX_BYTES * 4];
    struct vgpu_burst_grant g[VGPU_REGION_MAX_DEVICES];
    char err[VGPU_ERRMSG_MAX];
    size_t len = fread(buf, 1, sizeof(buf), stdin);
    int n = vgpu_burst_parse(buf, len, g, VGPU_REGION_MAX_DEVICES, err);
    if (n < 0) {
        printf("refused\n");
        return 0;
    }
    printf("ok\n");
    for (int i = 0; i < n; i++)
        printf("%s %llu\n", g[i].uuid, (unsigned long long)g[i].bytes);
    return 0;
}
`

// buildCParser compiles cParser against vgpu-core's src/burstfile.c; the
// test skips without gcc (fails under CI).
func buildCParser(t *testing.T) string {
	gcc := regiontest.Compiler(t, "the Go and C parsers of host/burst cannot be compared")
	dir := t.TempDir()
	src := filepath.Join(dir, "parse.c")
	require.NoError(t, os.WriteFile(src, []byte(cParser), 0o644))
	bin := filepath.Join(dir, "parse")
	out, err := exec.Command(gcc, "-std=gnu11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
		"-I", filepath.Join(coreDir, "include"), "-I", filepath.Join(coreDir, "src"), "-o", bin, src,
		filepath.Join(coreDir, "src", "burstfile.c"), filepath.Join(coreDir, "src", "config.c"),
		filepath.Join(coreDir, "src", "parse.c")).CombinedOutput()
	require.NoError(t, err, "compile: %s", out)
	return bin
}

// cParse runs the C parser over data.
func cParse(t *testing.T, bin string, data []byte) (map[string]uint64, bool) {
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if lines[0] == "refused" {
		return nil, false
	}
	require.Equal(t, "ok", lines[0])
	grants := map[string]uint64{}
	for _, l := range lines[1:] {
		uuid, num, ok := strings.Cut(l, " ")
		require.True(t, ok, l)
		v, err := strconv.ParseUint(num, 10, 64)
		require.NoError(t, err)
		grants[uuid] = v
	}
	return grants, true
}

// The library reads exactly what the plugin writes, and refuses what the
// Go parser refuses: the two sides of host/burst agree.
func TestCParserAgrees(t *testing.T) {
	bin := buildCParser(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var inputs [][]byte
	for range 30 {
		grants := map[string]uint64{}
		for range rng.IntN(region.MaxDevices + 1) {
			grants[fmt.Sprintf("GPU-%08x-%04x-0000-0000-000000000000", rng.Uint32(), rng.IntN(0x10000))] = rng.Uint64N(MaxGrantBytes + 1)
		}
		inputs = append(inputs, RenderFile(grants))
	}
	inputs = append(inputs, RenderFile(map[string]uint64{uuid0: MaxGrantBytes, uuid1: 0}))
	for _, tc := range hostileFiles() {
		inputs = append(inputs, []byte(tc.data))
	}
	// Single-byte mutations of a valid file.
	valid := RenderFile(map[string]uint64{uuid0: 3 * ChunkBytes, uuid1: 10})
	for range 200 {
		m := bytes.Clone(valid)
		m[rng.IntN(len(m))] = byte(rng.IntN(256))
		inputs = append(inputs, m)
	}
	for i, data := range inputs {
		goGrants, goErr := ParseFile(data)
		cGrants, cOK := cParse(t, bin, data)
		if !assert.Equal(t, goErr == nil, cOK, "input %d %q: Go error %v", i, data, goErr) {
			continue
		}
		if cOK {
			assert.Equal(t, goGrants, cGrants, "input %d %q", i, data)
		}
	}
}
