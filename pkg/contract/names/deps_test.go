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

package names_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/vgpu-dra/vgpu-dra-driver/internal/testenv"
)

// TestClusterSideLinksNoGPULibrary holds the promise of this package: the
// binaries that run away from GPU nodes build without NVML and without cgo
// of their own. Standard-library packages with cgo files (net, os/user,
// runtime/cgo, plugin) are allowed because CGO_ENABLED=0 builds them in pure
// Go; any other package with cgo, or go-nvml at all, fails the test.
func TestClusterSideLinksNoGPULibrary(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Unavailable(t, "go tool not on PATH: %v", err)
	}
	for _, cmd := range []string{"../../../cmd/dra-controller", "../../../cmd/kubectl-vgpu"} {
		out, err := exec.Command("go", "list", "-deps",
			"-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", cmd, err, out)
		}
		var pkgs int
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				t.Fatalf("go list -deps %s: unexpected line %q", cmd, line)
			}
			pkgs++
			path, std, cgoFiles := f[0], f[1] == "true", f[2] != "0"
			if strings.Contains(path, "go-nvml") {
				t.Errorf("%s depends on %s", cmd, path)
			}
			if cgoFiles && !std {
				t.Errorf("%s depends on %s, which has cgo files", cmd, path)
			}
		}
		if pkgs < 50 {
			t.Errorf("go list -deps %s listed only %d packages; the check saw nothing", cmd, pkgs)
		}
	}
}
