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

package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileReplacesContentAndMode(t *testing.T) {
	for _, d := range []Durability{Durable, Volatile} {
		dir := t.TempDir()
		path := filepath.Join(dir, "config")
		require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))

		require.NoError(t, WriteFile(path, []byte("new"), 0o644, d))

		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "new", string(got))
		info, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o644), info.Mode().Perm())
		assert.Equal(t, []string{"config"}, names(t, dir), "no temporary file is left")
	}
}

type failingReader struct{ sent bool }

func (r *failingReader) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		return copy(p, "partial"), nil
	}
	return 0, errors.New("source broke")
}

func TestWriteFailureKeepsTheTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pids")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))

	err := Write(path, &failingReader{}, 0o644, Durable)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "source broke")

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got), "readers never see the partial content")
	assert.Equal(t, []string{"pids"}, names(t, dir))
}

func TestWriteIntoMissingDirectoryIsNotExist(t *testing.T) {
	err := WriteFile(filepath.Join(t.TempDir(), "gone", "pids"), []byte("x"), 0o644, Volatile)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestWriteRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, Write("file", strings.NewReader("data"), 0o600, Durable))
	got, err := os.ReadFile("file")
	require.NoError(t, err)
	assert.Equal(t, "data", string(got))
}

func TestRemoveTempsRemovesOnlyTheTargetsTemporaries(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"checkpoint.json", "checkpoint.json.tmp-123", "checkpoint.json.tmp-",
		"other.tmp-9", "checkpoint.jsonx.tmp-1"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o600))
	}
	require.NoError(t, RemoveTemps(dir, "checkpoint.json"))
	assert.ElementsMatch(t, []string{"checkpoint.json", "checkpoint.json.tmp-", "other.tmp-9", "checkpoint.jsonx.tmp-1"},
		names(t, dir))
}

func TestRemoveTempsMissingDirectory(t *testing.T) {
	assert.NoError(t, RemoveTemps(filepath.Join(t.TempDir(), "gone"), "x"))
}

// A temporary file is created next to the target, so the rename never
// crosses file systems.
func TestTemporaryFileLivesNextToTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lib.so")
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Write(path, r, 0o644, Durable) }()
	_, err := w.Write([]byte("abc"))
	require.NoError(t, err)
	var temps []string
	for _, n := range names(t, dir) {
		if IsTemp(n, "lib.so") {
			temps = append(temps, n)
		}
	}
	assert.Len(t, temps, 1)
	require.NoError(t, w.Close())
	require.NoError(t, <-done)
	assert.Equal(t, []string{"lib.so"}, names(t, dir))
}
