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

package region

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

var cTool struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// coreDir is vgpu-core, relative to this package.
const coreDir = "../../../vgpu-core"

// buildCTool compiles vgpu-core's region-writer (tools/region-writer.c, the
// one C writer of regions for the cross-language tests) against
// vgpu_region.h once per test binary and returns its path; tests skip
// without gcc (fail under CI).
func buildCTool(t *testing.T) string {
	t.Helper()
	gcc := regiontest.Compiler(t, "the Go layout cannot be checked against vgpu_region.h")
	cTool.once.Do(func() {
		cTool.dir, cTool.err = os.MkdirTemp("", "region-tool-")
		if cTool.err != nil {
			return
		}
		cTool.path = filepath.Join(cTool.dir, "region-writer")
		cTool.out, cTool.err = exec.Command(gcc, "-std=gnu11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
			"-I", headerDir, "-I", filepath.Join(coreDir, "src"), "-o", cTool.path,
			filepath.Join(coreDir, "tools", "region-writer.c"), filepath.Join(coreDir, "src", "parse.c"),
			filepath.Join(coreDir, "src", "config.c")).CombinedOutput()
	})
	require.NoError(t, cTool.err, "compile vgpu-core/tools/region-writer.c: %s", cTool.out)
	return cTool.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cTool.dir != "" {
		_ = os.RemoveAll(cTool.dir)
	}
	os.Exit(code)
}
