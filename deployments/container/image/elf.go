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
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// multiarch maps an ELF machine to its Debian multiarch triple.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
}

// defaultLibraryDirs are the directories the dynamic loader searches without
// an ld.so.cache, in its order.
func defaultLibraryDirs(m elf.Machine) []string {
	dirs := []string{}
	if triple, ok := multiarch[m]; ok {
		dirs = append(dirs, "/lib/"+triple, "/usr/lib/"+triple)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// libraryClosure returns entries for the dynamic loader and every shared
// library the executables need, directly or through other libraries, plus
// the extra sonames and their needs. Each library is placed at the path
// where it was found, with its content (not a symlink), so the loader finds
// it in its default search path without an ld.so.cache. Static executables
// add nothing.
func libraryClosure(executables, extra, dirs []string) ([]Entry, error) {
	var entries []Entry
	seen := map[string]bool{}
	var machine elf.Machine
	var queue []string
	for _, exe := range executables {
		f, err := elf.Open(exe)
		if err != nil {
			return nil, fmt.Errorf("read ELF %s: %w", exe, err)
		}
		interp, needed, err := dynamicInfo(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("read ELF %s: %w", exe, err)
		}
		if interp == "" {
			continue
		}
		if machine != 0 && f.Machine != machine {
			return nil, fmt.Errorf("%s is built for %s, the other binaries for %s", exe, f.Machine, machine)
		}
		machine = f.Machine
		if !seen[interp] {
			seen[interp] = true
			src, err := filepath.EvalSymlinks(interp)
			if err != nil {
				return nil, fmt.Errorf("dynamic loader %s of %s: %w", interp, exe, err)
			}
			entries = append(entries, Entry{Path: interp, Mode: 0o755, Source: src})
		}
		queue = append(queue, needed...)
	}
	if machine == 0 {
		// Only static binaries: nothing loads libraries.
		return nil, nil
	}
	if len(dirs) == 0 {
		dirs = defaultLibraryDirs(machine)
	}
	queue = append(queue, extra...)
	for len(queue) > 0 {
		soname := queue[0]
		queue = queue[1:]
		if seen[soname] {
			continue
		}
		seen[soname] = true
		found, src, err := findLibrary(soname, dirs, machine)
		if err != nil {
			return nil, err
		}
		entries = append(entries, Entry{Path: found, Mode: 0o755, Source: src})
		f, err := elf.Open(src)
		if err != nil {
			return nil, fmt.Errorf("read ELF %s: %w", src, err)
		}
		_, needed, err := dynamicInfo(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("read ELF %s: %w", src, err)
		}
		queue = append(queue, needed...)
	}
	return entries, nil
}

// dynamicInfo returns the requested program interpreter and DT_NEEDED list.
func dynamicInfo(f *elf.File) (string, []string, error) {
	var interp string
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", nil, fmt.Errorf("program interpreter: %w", err)
		}
		for len(b) > 0 && b[len(b)-1] == 0 {
			b = b[:len(b)-1]
		}
		interp = string(b)
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return "", nil, fmt.Errorf("needed libraries: %w", err)
	}
	return interp, needed, nil
}

// findLibrary returns the image path (first directory that has soname for
// the right machine) and the real file to copy.
func findLibrary(soname string, dirs []string, machine elf.Machine) (string, string, error) {
	for _, dir := range dirs {
		candidate := path.Join(dir, soname)
		src, err := filepath.EvalSymlinks(candidate)
		if err != nil {
			continue
		}
		if ok, err := isMachine(src, machine); err != nil || !ok {
			continue
		}
		return candidate, src, nil
	}
	return "", "", fmt.Errorf("shared library %s (%s) not found in %v", soname, machine, dirs)
}

func isMachine(p string, machine elf.Machine) (bool, error) {
	info, err := os.Stat(p)
	if err != nil || !info.Mode().IsRegular() {
		return false, err
	}
	f, err := elf.Open(p)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	return f.Machine == machine, nil
}
