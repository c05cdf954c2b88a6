package regiontest

import (
	"os"
	"os/exec"
	"testing"
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
	if os.Getenv("CI") != "" {
		t.Fatalf("gcc not found under CI: %s", why)
	}
	t.Skipf("gcc not found; %s", why)
	return ""
}
