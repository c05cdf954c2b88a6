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

package regiontest

import (
	"os/exec"
	"testing"

	"github.com/vgpu-dra/vgpu-dra-driver/internal/testenv"
)

// Compiler returns the path of gcc, for the tests that compile C against
// vgpu_region.h or libvgpu.so's parser. Without gcc such a test is skipped
// with why, except under CI (the CI environment variable set), where it
// fails: there a missing compiler must not pass for a checked contract.
func Compiler(t testing.TB, why string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err == nil {
		return gcc
	}
	testenv.Unavailable(t, "gcc not found; %s", why)
	return ""
}
