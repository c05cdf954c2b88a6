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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/atomicfile"
)

// hashLen is the number of hex digits of the content hash in a versioned
// name: 48 bits keep accidental collisions out of reach for the handful of
// versions that ever coexist on a node.
const hashLen = 12

// fileMode of an installed library: world-readable because every container
// user loads it, writable by nobody but root.
const fileMode = 0o644

// Result describes one installation.
type Result struct {
	// Versioned is the absolute path of the versioned file the destination
	// now points to.
	Versioned string
	// Copied is false when an identical versioned file was already there.
	Copied bool
	// Pruned lists the older versions that were removed.
	Pruned []string
}

// Install copies src to a versioned file in the directory of dest and
// atomically points dest (a relative symlink) at it. The version that dest
// pointed to before is kept, so a plugin instance still running during a
// rolling update and its containers find it; all other versions of dest are
// removed.
func Install(ctx context.Context, src, dest string) (Result, error) {
	logger := klog.FromContext(ctx)
	if !filepath.IsAbs(dest) {
		return Result{}, fmt.Errorf("destination %q must be an absolute path", dest)
	}
	dir, base := filepath.Split(filepath.Clean(dest))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("create destination directory: %w", err)
	}
	if info, err := os.Lstat(dest); err == nil && info.IsDir() {
		return Result{}, fmt.Errorf("destination %s is a directory", dest)
	}

	sum, err := fileHash(src)
	if err != nil {
		return Result{}, err
	}
	versionedName := base + "." + sum[:hashLen]
	res := Result{Versioned: filepath.Join(dir, versionedName)}

	res.Copied, err = ensureCopy(src, res.Versioned, sum)
	if err != nil {
		return Result{}, err
	}
	previous, _ := os.Readlink(dest)
	if err := switchLink(dir, base, versionedName); err != nil {
		return Result{}, err
	}
	logger.Info("Installed", "destination", dest, "version", versionedName, "copied", res.Copied, "previous", previous)

	res.Pruned, err = prune(dir, base, versionedName, filepath.Base(previous))
	if err != nil {
		return res, err
	}
	for _, p := range res.Pruned {
		logger.V(2).Info("Removed old version", "path", p)
	}
	return res, nil
}

// fileHash returns the hex SHA-256 of a file's content.
func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open source: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read source %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ensureCopy makes dst an exact copy of src (whose hash is sum), writing a
// temporary file and renaming it so that dst never exists half-written. An
// existing dst with the right content is kept; it may be mapped by running
// processes.
func ensureCopy(src, dst, sum string) (bool, error) {
	if existing, err := fileHash(dst); err == nil && existing == sum {
		return false, nil
	}
	in, err := os.Open(src)
	if err != nil {
		return false, fmt.Errorf("open source: %w", err)
	}
	defer func() { _ = in.Close() }()

	if err := atomicfile.Write(dst, in, fileMode, atomicfile.Durable); err != nil {
		return false, fmt.Errorf("copy %s: %w", src, err)
	}
	return true, nil
}

// switchLink points dir/name at target with a single rename, which replaces
// a previous link or a plain file of that name atomically.
func switchLink(dir, name, target string) error {
	tmp := filepath.Join(dir, "."+name+".link-"+target)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale link %s: %w", tmp, err)
	}
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create link %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("switch %s to %s: %w", filepath.Join(dir, name), target, err)
	}
	return atomicfile.SyncDir(dir)
}

// prune removes versions of name other than keep..., plus temporary files
// that an interrupted install left behind.
func prune(dir, name string, keep ...string) ([]string, error) {
	// Temporary files of installers before this one were hidden (".name...").
	version := regexp.QuoteMeta(name) + `\.[0-9a-f]{` + fmt.Sprint(hashLen) + `}`
	pattern := regexp.MustCompile(`^(` + version + `|\.?` + version + regexp.QuoteMeta(atomicfile.TempInfix) + `.*)$`)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var removed []string
	for _, e := range entries {
		if !pattern.MatchString(e.Name()) || slices.Contains(keep, e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("remove old version %s: %w", p, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}
