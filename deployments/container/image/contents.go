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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// Paths of the build outputs inside the image. The Helm chart runs them by
// these paths.
const (
	PluginPath     = "/usr/bin/dra-kubelet-plugin"
	ControllerPath = "/usr/bin/dra-controller"
	InstallerPath  = "/usr/bin/vgpu-install"
	// KubectlVGPUPath is the kubectl plugin, for `kubectl cp` or an
	// init container that installs it; it is static.
	KubectlVGPUPath = "/usr/bin/kubectl-vgpu"
	LibvgpuPath     = "/usr/lib/vgpu-dra/libvgpu.so"
)

// NonRootUID is the user the image runs as unless a pod says otherwise
// (distroless' "nonroot"). The kubelet plugin overrides it with root.
const NonRootUID = 65532

// runtimeLibraries are loaded at run time by libraries that come from the
// host (NVML from the driver root) rather than linked by our binaries, so
// the ELF closure of the binaries cannot find them.
var runtimeLibraries = []string{"libdl.so.2", "libpthread.so.0", "libm.so.6", "librt.so.1"}

// Inputs are the build outputs the image is made of.
type Inputs struct {
	// Plugin is the dra-kubelet-plugin binary (required).
	Plugin string
	// Controller is the dra-controller binary; empty leaves it out.
	Controller string
	// KubectlVGPU is the kubectl-vgpu plugin binary; empty leaves it out.
	KubectlVGPU string
	// Installer is the vgpu-install binary (required).
	Installer string
	// Libvgpu is libvgpu.so (required).
	Libvgpu string
	// LibraryDirs are searched, in order, for the shared libraries the
	// binaries need; empty means the usual directories for the binaries'
	// architecture.
	LibraryDirs []string
}

// Entry is one file, directory or symlink of the image.
type Entry struct {
	// Path is absolute and clean.
	Path string
	// Mode holds the type (fs.ModeDir, fs.ModeSymlink or none for a regular
	// file) and the permission bits, fs.ModeSticky included.
	Mode fs.FileMode
	// Source is the file a regular file is copied from, unless Data is set.
	Source string
	// Data is the content of a small generated file.
	Data []byte
	// Target is a symlink's target.
	Target string
}

// Contents returns the image's entries sorted by path, parent directories
// included, or an error naming the missing or unusable input.
func Contents(in Inputs) ([]Entry, error) {
	binaries := []struct{ name, src, dst string }{
		{"plugin", in.Plugin, PluginPath},
		{"controller", in.Controller, ControllerPath},
		{"installer", in.Installer, InstallerPath},
		{"kubectl-vgpu", in.KubectlVGPU, KubectlVGPUPath},
	}
	var entries []Entry
	var executables []string
	for _, b := range binaries {
		if b.src == "" {
			if b.name == "controller" || b.name == "kubectl-vgpu" {
				continue
			}
			return nil, fmt.Errorf("inputs: the %s binary is required", b.name)
		}
		if err := checkRegular(b.src, b.name); err != nil {
			return nil, err
		}
		entries = append(entries, Entry{Path: b.dst, Mode: 0o755, Source: b.src})
		executables = append(executables, b.src)
	}
	if in.Libvgpu == "" {
		return nil, errors.New("inputs: libvgpu.so is required")
	}
	if err := checkRegular(in.Libvgpu, "libvgpu.so"); err != nil {
		return nil, err
	}
	entries = append(entries, Entry{Path: LibvgpuPath, Mode: 0o644, Source: in.Libvgpu})

	libs, err := libraryClosure(executables, runtimeLibraries, in.LibraryDirs)
	if err != nil {
		return nil, err
	}
	entries = append(entries, libs...)
	entries = append(entries, baseFiles()...)
	return complete(entries)
}

func checkRegular(p, what string) error {
	info, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("inputs: %s: %w", what, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("inputs: %s %s is not a regular file", what, p)
	}
	return nil
}

// baseFiles are what programs and the kubelet expect of any image: users to
// resolve the numeric user, and a writable /tmp.
func baseFiles() []Entry {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
	return []Entry{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		{Path: "/root", Mode: fs.ModeDir | 0o700},
		{Path: "/home/nonroot", Mode: fs.ModeDir | 0o700},
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
}

// complete adds the missing parent directories, rejects two different
// entries for one path and sorts by path, so that the tar and the directory
// are written in one stable order.
func complete(entries []Entry) ([]Entry, error) {
	byPath := map[string]Entry{}
	for _, e := range entries {
		if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || e.Path == "/" {
			return nil, fmt.Errorf("entry path %q must be absolute, clean and not the root", e.Path)
		}
		if old, ok := byPath[e.Path]; ok {
			if !sameEntry(old, e) {
				return nil, fmt.Errorf("two different entries for %s", e.Path)
			}
			continue
		}
		byPath[e.Path] = e
	}
	for p := range byPath {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if existing, ok := byPath[dir]; ok {
				if !existing.Mode.IsDir() {
					return nil, fmt.Errorf("%s is needed as a directory for %s", dir, p)
				}
				continue
			}
			byPath[dir] = Entry{Path: dir, Mode: fs.ModeDir | 0o755}
		}
	}
	out := make([]Entry, 0, len(byPath))
	for _, e := range byPath {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func sameEntry(a, b Entry) bool {
	return a.Path == b.Path && a.Mode == b.Mode && a.Source == b.Source && a.Target == b.Target && string(a.Data) == string(b.Data)
}
