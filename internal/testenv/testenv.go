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

// Package testenv is how a test says it cannot run on this machine: not
// root, vgpu-core's library or fakes not built, a tool missing. Such a test
// is skipped with why, and counted where `make test` runs it; under CI it
// fails, since there a test that did not run must not pass for one that did.
// vgpu-core's C tests do the same with check_unavailable (test/check.h).
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

const (
	// CIEnv set to anything but "" marks a CI run (.ci/run sets CI=true).
	CIEnv = "CI"
	// SkipLogEnv names the file a skipped test appends "package Test: why"
	// to; hack/run-parts.sh (make test) makes it and counts its lines.
	SkipLogEnv = "VGPU_TEST_SKIP_LOG"
)

// Unavailable ends the test because what it needs is missing here, format
// and args saying what (e.g. "needs root for a private mount namespace").
// Under CI it fails the test; elsewhere it records the skip in
// $VGPU_TEST_SKIP_LOG and skips it.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv(CIEnv) != "" {
		t.Fatalf("did not run under CI (%s set): %s", CIEnv, why)
	}
	if log := os.Getenv(SkipLogEnv); log != "" {
		if err := appendLine(log, fmt.Sprintf("%s %s: %s", packageDir(), t.Name(), why)); err != nil {
			t.Logf("cannot record the skip in %s: %v", log, err)
		}
	}
	t.Skip(why)
}

// appendLine appends one line to path; O_APPEND keeps the lines of test
// binaries running side by side whole.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// packageDir is the test's package directory relative to the module root
// (go test runs a test binary in its package's directory), or the
// directory itself outside a module.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil {
				return wd
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}
