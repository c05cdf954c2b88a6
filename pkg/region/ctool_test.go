package region

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var cTool struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// buildCTool compiles testdata/region_tool.c against vgpu_region.h once per
// test binary and returns its path; tests skip without gcc.
func buildCTool(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found; the Go layout cannot be checked against vgpu_region.h")
	}
	cTool.once.Do(func() {
		cTool.dir, cTool.err = os.MkdirTemp("", "region-tool-")
		if cTool.err != nil {
			return
		}
		cTool.path = filepath.Join(cTool.dir, "region_tool")
		cTool.out, cTool.err = exec.Command(gcc, "-std=c11", "-Wall", "-Wextra", "-Werror",
			"-I", headerDir, "-o", cTool.path, filepath.Join("testdata", "region_tool.c")).CombinedOutput()
	})
	require.NoError(t, cTool.err, "compile testdata/region_tool.c: %s", cTool.out)
	return cTool.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cTool.dir != "" {
		_ = os.RemoveAll(cTool.dir)
	}
	os.Exit(code)
}
