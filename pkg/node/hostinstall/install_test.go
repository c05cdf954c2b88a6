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

package hostinstall

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
)

func writeSource(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "libvgpu.so")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func readThrough(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestInstallFresh(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dest := filepath.Join(t.TempDir(), "usr", "local", "vgpu", "libvgpu.so")
	res, err := Install(ctx, writeSource(t, "v1"), dest)
	require.NoError(t, err)

	assert.True(t, res.Copied)
	assert.Equal(t, filepath.Dir(dest), filepath.Dir(res.Versioned))
	assert.Regexp(t, `^libvgpu\.so\.[0-9a-f]{12}$`, filepath.Base(res.Versioned))
	target, err := os.Readlink(dest)
	require.NoError(t, err)
	assert.Equal(t, filepath.Base(res.Versioned), target, "the link must be relative to resolve inside and outside the pod")
	assert.Equal(t, "v1", readThrough(t, dest))
	info, err := os.Stat(res.Versioned)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())
}

func TestInstallSameContentIsIdempotent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dest := filepath.Join(t.TempDir(), "libvgpu.so")
	src := writeSource(t, "v1")
	first, err := Install(ctx, src, dest)
	require.NoError(t, err)
	before, err := os.Stat(first.Versioned)
	require.NoError(t, err)

	second, err := Install(ctx, src, dest)
	require.NoError(t, err)
	assert.False(t, second.Copied)
	assert.Empty(t, second.Pruned)
	after, err := os.Stat(second.Versioned)
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "an identical version must not be rewritten: processes may have it mapped")
}

func TestInstallUpgradeKeepsPreviousAndPrunesOlder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dest := filepath.Join(t.TempDir(), "libvgpu.so")
	v1, err := Install(ctx, writeSource(t, "v1"), dest)
	require.NoError(t, err)
	// A container started on v1 holds it open; the upgrade must not touch it.
	held, err := os.Open(dest)
	require.NoError(t, err)
	defer func() { _ = held.Close() }()

	v2, err := Install(ctx, writeSource(t, "v2"), dest)
	require.NoError(t, err)
	assert.Equal(t, "v2", readThrough(t, dest))
	assert.FileExists(t, v1.Versioned, "the previous version stays for pods still using it")
	assert.Empty(t, v2.Pruned)
	buf := make([]byte, 2)
	_, err = held.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, "v1", string(buf))

	v3, err := Install(ctx, writeSource(t, "v3"), dest)
	require.NoError(t, err)
	assert.Equal(t, "v3", readThrough(t, dest))
	assert.Equal(t, []string{v1.Versioned}, v3.Pruned)
	assert.NoFileExists(t, v1.Versioned)
	assert.FileExists(t, v2.Versioned)
}

func TestInstallReplacesPlainFile(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dest := filepath.Join(t.TempDir(), "libvgpu.so")
	require.NoError(t, os.WriteFile(dest, []byte("hand-copied"), 0o644))
	_, err := Install(ctx, writeSource(t, "v1"), dest)
	require.NoError(t, err)
	assert.Equal(t, "v1", readThrough(t, dest))
	info, err := os.Lstat(dest)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, info.Mode().Type())
}

func TestInstallRemovesLeftoverTemporaries(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "libvgpu.so")
	stale := filepath.Join(dir, "libvgpu.so.0123456789ab.tmp-42")
	require.NoError(t, os.WriteFile(stale, []byte("partial"), 0o600))
	// Left by an installer of an earlier release, which hid its temporaries.
	staleHidden := filepath.Join(dir, ".libvgpu.so.0123456789ab.tmp-43")
	require.NoError(t, os.WriteFile(staleHidden, []byte("partial"), 0o600))
	unrelated := filepath.Join(dir, "libvgpu.so.notes")
	require.NoError(t, os.WriteFile(unrelated, nil, 0o600))

	res, err := Install(ctx, writeSource(t, "v1"), dest)
	require.NoError(t, err)
	assert.Contains(t, res.Pruned, stale)
	assert.Contains(t, res.Pruned, staleHidden)
	assert.NoFileExists(t, stale)
	assert.NoFileExists(t, staleHidden)
	assert.FileExists(t, unrelated, "only files of the versioned pattern are pruned")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.Contains(e.Name(), ".link-"), "temporary link %s left behind", e.Name())
	}
}

func TestInstallErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()

	_, err := Install(ctx, filepath.Join(dir, "missing.so"), filepath.Join(dir, "libvgpu.so"))
	require.ErrorContains(t, err, "missing.so")

	_, err = Install(ctx, writeSource(t, "v1"), "relative/libvgpu.so")
	require.ErrorContains(t, err, `"relative/libvgpu.so" must be an absolute path`)

	asDir := filepath.Join(dir, "libvgpu-dir.so")
	require.NoError(t, os.Mkdir(asDir, 0o755))
	_, err = Install(ctx, writeSource(t, "v1"), asDir)
	require.ErrorContains(t, err, "is a directory")
}
