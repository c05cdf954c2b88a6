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

package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/internal/testenv"
)

// hostDynamicBinary is a dynamically linked program of the build machine
// that stands in for the plugin: the tests need a real ELF closure.
func hostDynamicBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/env", "/bin/env"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		interp, _, err := dynamicInfo(f)
		_ = f.Close()
		if err == nil && interp != "" {
			return p
		}
	}
	testenv.Unavailable(t, "no dynamically linked env(1) on this machine")
	return ""
}

func testInputs(t *testing.T) Inputs {
	t.Helper()
	lib := filepath.Join(t.TempDir(), "libvgpu.so")
	require.NoError(t, os.WriteFile(lib, []byte("not really a library"), 0o600))
	env := hostDynamicBinary(t)
	return Inputs{Plugin: env, Installer: env, Libvgpu: lib}
}

func byPath(entries []Entry) map[string]Entry {
	m := map[string]Entry{}
	for _, e := range entries {
		m[e.Path] = e
	}
	return m
}

func TestContents(t *testing.T) {
	in := testInputs(t)
	entries, err := Contents(in)
	require.NoError(t, err)
	m := byPath(entries)

	assert.Equal(t, Entry{Path: PluginPath, Mode: 0o755, Source: in.Plugin}, m[PluginPath])
	assert.Equal(t, Entry{Path: InstallerPath, Mode: 0o755, Source: in.Installer}, m[InstallerPath])
	assert.Equal(t, Entry{Path: LibvgpuPath, Mode: 0o644, Source: in.Libvgpu}, m[LibvgpuPath])
	assert.NotContains(t, m, ControllerPath, "no controller binary was given")

	f, err := elf.Open(in.Plugin)
	require.NoError(t, err)
	interp, needed, err := dynamicInfo(f)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	assert.Contains(t, m, interp, "the dynamic loader")
	for _, soname := range append(needed, runtimeLibraries...) {
		found := false
		for p, e := range m {
			if filepath.Base(p) == soname {
				found = true
				assert.True(t, e.Mode.IsRegular(), "%s must be a copy, not a link", p)
			}
		}
		assert.True(t, found, "library %s missing", soname)
	}

	for i, e := range entries {
		if i > 0 {
			assert.Less(t, entries[i-1].Path, e.Path, "entries must be sorted and unique")
		}
		if e.Path != "/" && filepath.Dir(e.Path) != "/" {
			parent, ok := m[filepath.Dir(e.Path)]
			assert.True(t, ok && parent.Mode.IsDir(), "parent of %s missing", e.Path)
		}
	}
	assert.Equal(t, fs.ModeDir|fs.ModeSticky|0o777, m["/tmp"].Mode)
	assert.Contains(t, string(m["/etc/passwd"].Data), "nonroot:x:65532:65532:")
}

func TestContentsWithController(t *testing.T) {
	in := testInputs(t)
	in.Controller = in.Plugin
	entries, err := Contents(in)
	require.NoError(t, err)
	assert.Equal(t, Entry{Path: ControllerPath, Mode: 0o755, Source: in.Controller}, byPath(entries)[ControllerPath])
}

func TestContentsWithKubectlPlugin(t *testing.T) {
	in := testInputs(t)
	entries, err := Contents(in)
	require.NoError(t, err)
	assert.NotContains(t, byPath(entries), KubectlVGPUPath, "no kubectl-vgpu binary was given")
	in.KubectlVGPU = in.Installer
	entries, err = Contents(in)
	require.NoError(t, err)
	assert.Equal(t, Entry{Path: KubectlVGPUPath, Mode: 0o755, Source: in.KubectlVGPU}, byPath(entries)[KubectlVGPUPath])
}

func TestContentsErrors(t *testing.T) {
	valid := testInputs(t)
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		mutate func(*Inputs)
		want   string
	}{
		"no plugin":        {func(in *Inputs) { in.Plugin = "" }, "the plugin binary is required"},
		"no installer":     {func(in *Inputs) { in.Installer = "" }, "the installer binary is required"},
		"no libvgpu":       {func(in *Inputs) { in.Libvgpu = "" }, "libvgpu.so is required"},
		"missing plugin":   {func(in *Inputs) { in.Plugin = filepath.Join(dir, "nope") }, "plugin: "},
		"libvgpu is a dir": {func(in *Inputs) { in.Libvgpu = dir }, "is not a regular file"},
		"plugin not ELF":   {func(in *Inputs) { in.Plugin = valid.Libvgpu }, "read ELF"},
		"no library dirs": {func(in *Inputs) { in.LibraryDirs = []string{dir} },
			"not found in [" + dir + "]"},
	} {
		t.Run(name, func(t *testing.T) {
			in := valid
			tc.mutate(&in)
			_, err := Contents(in)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestCompleteRejectsConflicts(t *testing.T) {
	_, err := complete([]Entry{{Path: "/a", Mode: 0o644, Data: []byte("x")}, {Path: "/a", Mode: 0o644, Data: []byte("y")}})
	require.ErrorContains(t, err, "two different entries for /a")
	_, err = complete([]Entry{{Path: "/a", Mode: 0o644}, {Path: "/a/b", Mode: 0o644}})
	require.ErrorContains(t, err, "/a is needed as a directory for /a/b")
	_, err = complete([]Entry{{Path: "rel", Mode: 0o644}})
	require.ErrorContains(t, err, `"rel" must be absolute`)
}

// layerListing describes every member of a layer tar in a comparable form.
func layerListing(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		assert.Equal(t, 0, hdr.Uid, hdr.Name)
		assert.Equal(t, 0, hdr.Gid, hdr.Name)
		out["/"+strings.TrimSuffix(hdr.Name, "/")] = describe(hdr.Typeflag, hdr.Mode, hdr.Linkname, data)
	}
}

func describe(typ byte, mode int64, link string, data []byte) string {
	return string(typ) + " " + fs.FileMode(mode).String() + " " + link + " " + string(data)
}

// TestRootfsMatchesLayer: the Dockerfile's tree and the docker-free layer
// hold the same files with the same modes and content.
func TestRootfsMatchesLayer(t *testing.T) {
	entries, err := Contents(testInputs(t))
	require.NoError(t, err)
	var layer bytes.Buffer
	require.NoError(t, WriteLayer(&layer, entries, time.Unix(0, 0)))
	fromLayer := layerListing(t, &layer)

	root := filepath.Join(t.TempDir(), "rootfs")
	require.NoError(t, WriteRootfs(root, entries))
	fromDir := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if p == root {
			return nil
		}
		info, err := os.Lstat(p)
		require.NoError(t, err)
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(p, root+"/"))
		mode := int64(info.Mode().Perm())
		if info.Mode()&fs.ModeSticky != 0 {
			mode |= 0o1000
		}
		switch {
		case info.IsDir():
			fromDir[rel] = describe(tar.TypeDir, mode, "", nil)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			fromDir[rel] = describe(tar.TypeSymlink, mode, target, nil)
		default:
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			fromDir[rel] = describe(tar.TypeReg, mode, "", data)
		}
		return nil
	}))
	assert.Equal(t, fromLayer, fromDir)

	require.ErrorContains(t, WriteRootfs(root, entries), "is not empty")
}

// TestRootfsRuns runs the staged binary in the staged tree: the loader and C
// library closure is complete and where the loader looks for it.
func TestRootfsRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "chroot needs root")
	}
	entries, err := Contents(testInputs(t))
	require.NoError(t, err)
	root := filepath.Join(t.TempDir(), "rootfs")
	require.NoError(t, WriteRootfs(root, entries))

	cmd := exec.Command(PluginPath, "VGPU_IMAGE_TEST=ok")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, "VGPU_IMAGE_TEST=ok\n", string(out))
}

func TestBuildIsReproducible(t *testing.T) {
	entries, err := Contents(testInputs(t))
	require.NoError(t, err)
	created := time.Unix(1700000000, 0).UTC()
	a, err := Build(entries, DefaultConfig("v1"), created)
	require.NoError(t, err)
	b, err := Build(entries, DefaultConfig("v1"), created)
	require.NoError(t, err)
	da, err := a.Digest()
	require.NoError(t, err)
	db, err := b.Digest()
	require.NoError(t, err)
	assert.Equal(t, da, db)

	later, err := Build(entries, DefaultConfig("v1"), created.Add(time.Second))
	require.NoError(t, err)
	dl, err := later.Digest()
	require.NoError(t, err)
	assert.NotEqual(t, da, dl, "the timestamp is part of the image")
}

func TestDockerArchive(t *testing.T) {
	entries, err := Contents(testInputs(t))
	require.NoError(t, err)
	img, err := Build(entries, DefaultConfig("v9"), time.Unix(0, 0))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "image.tar")
	const ref = "ghcr.io/vgpu-dra/vgpu-dra-driver:v9"
	require.NoError(t, WriteDockerArchive(out, ref, img))

	back, err := tarball.ImageFromPath(out, nil)
	require.NoError(t, err)
	want, err := img.Digest()
	require.NoError(t, err)
	got, err := back.Digest()
	require.NoError(t, err)
	assert.Equal(t, want, got)

	cf, err := back.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[machineOf(t, entries)], cf.Architecture)
	assert.Equal(t, []string{PluginPath}, cf.Config.Entrypoint)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, "v9", cf.Config.Labels["org.opencontainers.image.version"])

	layers, err := back.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	listing := layerListing(t, rc)
	assert.Contains(t, listing, LibvgpuPath)
	assert.Len(t, listing, len(entries))

	manifest := readMember(t, out, "manifest.json")
	var m []struct{ RepoTags []string }
	require.NoError(t, json.Unmarshal(manifest, &m))
	require.Len(t, m, 1)
	assert.Equal(t, []string{ref}, m[0].RepoTags)

	require.ErrorContains(t, WriteDockerArchive(out, "no tag here", img), `image reference "no tag here"`)
}

func machineOf(t *testing.T, entries []Entry) elf.Machine {
	t.Helper()
	f, err := elf.Open(byPath(entries)[PluginPath].Source)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	return f.Machine
}

func readMember(t *testing.T, archive, name string) []byte {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		require.NoError(t, err, "no %s in %s", name, archive)
		if hdr.Name == name {
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			return data
		}
	}
}

// TestDockerfileMatchesConfig keeps the Dockerfile's final stage in step
// with DefaultConfig, so both builds give the same runtime settings.
func TestDockerfileMatchesConfig(t *testing.T) {
	f, err := os.Open("../Dockerfile")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()

	// Join continuation lines and keep the instructions after the last FROM.
	var final []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		instr := cur.String()
		cur.Reset()
		if strings.HasPrefix(instr, "FROM ") {
			final = nil
		}
		final = append(final, instr)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, final)
	assert.Equal(t, "FROM scratch", final[0])
	assert.Contains(t, final, "COPY --from=build /rootfs/ /")

	want := DefaultConfig("${VERSION}")
	labels := map[string]string{}
	labelRE := regexp.MustCompile(`([a-z.]+)="([^"]*)"`)
	for _, instr := range final {
		keyword, rest, _ := strings.Cut(instr, " ")
		switch keyword {
		case "LABEL":
			for _, m := range labelRE.FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = m[2]
			}
		case "ENV":
			assert.Equal(t, want.Env, []string{rest})
		case "USER":
			assert.Equal(t, want.User, rest)
		case "ENTRYPOINT":
			var ep []string
			require.NoError(t, json.Unmarshal([]byte(rest), &ep))
			assert.Equal(t, want.Entrypoint, ep)
		}
	}
	assert.Equal(t, want.Labels, labels)
}
