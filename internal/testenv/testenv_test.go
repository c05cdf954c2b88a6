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

package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv makes TestUnavailableHelper call Unavailable; the test binary
// runs it as a child so that its failure or skip can be looked at.
const helperEnv = "VGPU_TESTENV_HELPER"

func TestUnavailableHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		return // only as TestUnavailable's child
	}
	Unavailable(t, "needs %s", "a thing")
	t.Error("Unavailable returned")
}

// runHelper runs TestUnavailableHelper in a child with CI set to ci and the
// skip log at log; it returns the child's output and exit error.
func runHelper(t *testing.T, ci, log string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnavailableHelper$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", CIEnv+"="+ci, SkipLogEnv+"="+log)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestUnavailable(t *testing.T) {
	t.Run("fails under CI", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "skipped")
		out, err := runHelper(t, "true", log)
		require.Error(t, err, out)
		assert.Contains(t, out, "--- FAIL: TestUnavailableHelper")
		assert.Contains(t, out, "did not run under CI (CI set): needs a thing")
		assert.NotContains(t, out, "Unavailable returned")
		assert.NoFileExists(t, log, "a failed test is no skip")
	})
	t.Run("skips and records elsewhere", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "skipped")
		require.NoError(t, os.WriteFile(log, []byte("earlier: line\n"), 0o644))
		out, err := runHelper(t, "", log)
		require.NoError(t, err, out)
		assert.Contains(t, out, "--- SKIP: TestUnavailableHelper")
		assert.Contains(t, out, "needs a thing")
		assert.NotContains(t, out, "Unavailable returned")
		data, err := os.ReadFile(log)
		require.NoError(t, err)
		assert.Equal(t, "earlier: line\n./internal/testenv TestUnavailableHelper: needs a thing\n", string(data))
	})
	t.Run("skips without a log", func(t *testing.T) {
		out, err := runHelper(t, "", "")
		require.NoError(t, err, out)
		assert.Contains(t, out, "--- SKIP: TestUnavailableHelper")
	})
}
