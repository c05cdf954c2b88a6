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
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteLayer writes the entries as one uncompressed layer tar. The output
// depends only on the entries, the content of their sources and mtime:
// entries in path order, owner root, no host user names or timestamps.
func WriteLayer(w io.Writer, entries []Entry, mtime time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if err := writeTarEntry(tw, e, mtime); err != nil {
			return fmt.Errorf("layer entry %s: %w", e.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish layer: %w", err)
	}
	return nil
}

func writeTarEntry(tw *tar.Writer, e Entry, mtime time.Time) error {
	hdr := &tar.Header{
		Name:    strings.TrimPrefix(e.Path, "/"),
		Mode:    tarMode(e.Mode),
		ModTime: mtime.UTC().Truncate(time.Second),
		Format:  tar.FormatPAX,
	}
	switch {
	case e.Mode.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case e.Mode&fs.ModeSymlink != 0:
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = e.Target
		return tw.WriteHeader(hdr)
	case e.Mode.IsRegular():
		content, size, closeFn, err := open(e)
		if err != nil {
			return err
		}
		defer closeFn()
		hdr.Typeflag = tar.TypeReg
		hdr.Size = size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if n, err := io.Copy(tw, content); err != nil {
			return err
		} else if n != size {
			return fmt.Errorf("%s changed size while being read", e.Source)
		}
		return nil
	default:
		return fmt.Errorf("unsupported file type %s", e.Mode.Type())
	}
}

// tarMode converts permission bits to the tar header's mode; only the
// sticky bit of the special bits is used by images.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// open returns the content of a regular-file entry.
func open(e Entry) (io.Reader, int64, func(), error) {
	if e.Data != nil || e.Source == "" {
		return bytes.NewReader(e.Data), int64(len(e.Data)), func() {}, nil
	}
	f, err := os.Open(e.Source)
	if err != nil {
		return nil, 0, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, nil, err
	}
	return f, info.Size(), func() { _ = f.Close() }, nil
}

// WriteRootfs materialises the entries under root, which must be empty or
// absent; modes are set explicitly so the umask does not matter. The
// Dockerfile copies this tree into a scratch image.
func WriteRootfs(root string, entries []Entry) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("create rootfs %s: %w", root, err)
	}
	if existing, err := os.ReadDir(root); err != nil {
		return fmt.Errorf("read rootfs %s: %w", root, err)
	} else if len(existing) > 0 {
		return fmt.Errorf("rootfs %s is not empty", root)
	}
	for _, e := range entries {
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		if err := writeEntry(p, e); err != nil {
			return fmt.Errorf("rootfs entry %s: %w", e.Path, err)
		}
	}
	return nil
}

func writeEntry(p string, e Entry) error {
	switch {
	case e.Mode.IsDir():
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
		return os.Chmod(p, e.Mode&(fs.ModePerm|fs.ModeSticky))
	case e.Mode&fs.ModeSymlink != 0:
		return os.Symlink(e.Target, p)
	case e.Mode.IsRegular():
		content, _, closeFn, err := open(e)
		if err != nil {
			return err
		}
		defer closeFn()
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, content); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Chmod(e.Mode.Perm()); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	default:
		return fmt.Errorf("unsupported file type %s", e.Mode.Type())
	}
}
