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

package region

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

// headerDir holds vgpu_region.h, relative to this package.
const headerDir = "../../../vgpu-core/include"

// TestSizeMatchesHeader compiles a program against vgpu_region.h and
// compares the size it reports with Size.
func TestSizeMatchesHeader(t *testing.T) {
	gcc := regiontest.Compiler(t, "the region size cannot be checked against vgpu_region.h")
	header := filepath.Join(headerDir, "vgpu_region.h")
	require.FileExists(t, header, "the shared-region contract header must exist")

	dir := t.TempDir()
	src := filepath.Join(dir, "size.c")
	require.NoError(t, os.WriteFile(src, []byte(`#include <stdio.h>
#include "vgpu_region.h"
int main(void) {
	printf("%zu %zu\n", sizeof(struct vgpu_region), (size_t)VGPU_REGION_SIZE);
	return 0;
}
`), 0o644))
	bin := filepath.Join(dir, "size")
	out, err := exec.Command(gcc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", headerDir, "-o", bin, src).CombinedOutput()
	require.NoError(t, err, "compile against %s: %s", header, out)
	out, err = exec.Command(bin).Output()
	require.NoError(t, err)

	fields := strings.Fields(string(out))
	require.Len(t, fields, 2, "program output %q", out)
	for i, name := range []string{"sizeof(struct vgpu_region)", "VGPU_REGION_SIZE"} {
		v, err := strconv.ParseInt(fields[i], 10, 64)
		require.NoError(t, err)
		assert.EqualValues(t, Size, v, "%s differs from region.Size", name)
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "region")
	require.NoError(t, Create(path))

	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, info.Mode().IsRegular())
	assert.EqualValues(t, Size, info.Size())
	assert.Equal(t, FileMode, info.Mode().Perm(), "mode must not depend on the umask")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(make([]byte, Size), data), "a new region is zero-filled")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

func TestCreateKeepsExistingRegion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	require.NoError(t, Create(path))
	// A process attached to the region has initialised it.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("VGPUREG1"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	require.NoError(t, Create(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "VGPUREG1", string(data[:8]), "an existing region must not be wiped")
}

func TestCreateResizesDamagedRegionInPlace(t *testing.T) {
	for name, content := range map[string][]byte{
		"short": []byte("short"),
		"grown": append([]byte("VGPUREG1"), make([]byte, 3*Size)...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "region")
			require.NoError(t, os.WriteFile(path, content, 0o600))
			before, err := os.Stat(path)
			require.NoError(t, err)

			require.NoError(t, Create(path))
			info, err := os.Stat(path)
			require.NoError(t, err)
			assert.EqualValues(t, Size, info.Size(), "a region of the wrong size is resized")
			assert.True(t, os.SameFile(before, info), "resized in place: processes sharing the file keep sharing it")
			assert.Equal(t, FileMode, info.Mode().Perm())
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			want := make([]byte, Size)
			copy(want, content)
			assert.True(t, bytes.Equal(want, data), "the first bytes are kept, the rest is zero")
		})
	}
}

func TestCreateRejectsNonRegularFile(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "dir")
	require.NoError(t, os.Mkdir(sub, 0o755))
	err := Create(sub)
	require.Error(t, err)
	assert.Contains(t, err.Error(), sub)
	assert.Contains(t, err.Error(), "not a regular file")

	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("keep"), 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(target, link))
	err = Create(link)
	require.Error(t, err, "a symlink is never followed")
	kept, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(kept))

	err = Create(filepath.Join(dir, "missing", "region"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing")
}
