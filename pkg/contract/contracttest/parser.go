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

package contracttest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

// coreDir is vgpu-core, found from this file so that any package's test can build the tool.
func coreDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "vgpu-core")
}

// units are the library's sources the tool links: the parsers and what they call.
var units = []string{"hostpids.c", "burstfile.c", "burst.c", "config.c", "parse.c", "log.c"}

// Parser is libvgpu.so's side of the contracts, built for one test.
type Parser struct {
	bin string
}

// Build compiles contract-parse into the test's temporary directory; the
// test is skipped without gcc (fails under CI: testenv.Unavailable).
func Build(t testing.TB) *Parser {
	t.Helper()
	gcc := regiontest.Compiler(t, "the Go and C parsers of the contracts cannot be compared")
	core := coreDir()
	bin := filepath.Join(t.TempDir(), "contract-parse")
	args := []string{"-std=gnu11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
		"-I", filepath.Join(core, "include"), "-I", filepath.Join(core, "src"), "-o", bin,
		filepath.Join(core, "tools", "contract-parse.c")}
	for _, u := range units {
		args = append(args, filepath.Join(core, "src", u))
	}
	out, err := exec.Command(gcc, append(args, "-lpthread")...).CombinedOutput()
	require.NoError(t, err, "compile vgpu-core/tools/contract-parse.c: %s", out)
	return &Parser{bin: bin}
}

// Parse runs the library's parser of format over data. It returns the
// lines the tool prints for what it read, or the library's reason when it
// refuses the file (reason is "" when it accepts it).
func (p *Parser) Parse(t testing.TB, format string, data []byte) (lines []string, reason string) {
	t.Helper()
	cmd := exec.Command(p.bin, format, "-")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	require.NoError(t, err, "contract-parse %s", format)
	all := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if r, ok := strings.CutPrefix(all[0], "refused: "); ok {
		return nil, r
	}
	require.Equal(t, "ok", all[0], "contract-parse %s: first line", format)
	return all[1:], ""
}

// Constants returns the limits the C headers define, by macro name.
func (p *Parser) Constants(t testing.TB) map[string]uint64 {
	t.Helper()
	out, err := exec.Command(p.bin, "--constants").Output()
	require.NoError(t, err, "contract-parse --constants")
	consts := map[string]uint64{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var name string
		var v uint64
		_, err := fmt.Sscanf(line, "%s %d", &name, &v)
		require.NoError(t, err, "contract-parse --constants: %q", line)
		consts[name] = v
	}
	return consts
}

// Agree runs every input through the Go parser (parse) and the library's
// parser of format, and requires the same verdict and, where both accept,
// the same values (fromC turns the tool's lines into parse's result).
// Inputs named "golden/…" must be accepted and "hostile/…" refused. It
// returns, per input, whether both accepted it.
func Agree[T any](t *testing.T, p *Parser, format string, inputs map[string][]byte,
	parse func([]byte) (T, error), fromC func(t *testing.T, lines []string) T) map[string]bool {
	t.Helper()
	accepted := make(map[string]bool, len(inputs))
	for name, data := range inputs {
		goValue, goErr := parse(data)
		lines, reason := p.Parse(t, format, data)
		cOK := reason == ""
		if !assert.Equal(t, goErr == nil, cOK, "%s %q: Go error %v, C reason %q", name, data, goErr, reason) {
			continue
		}
		accepted[name] = cOK
		if cOK {
			assert.Equal(t, goValue, fromC(t, lines), "%s %q", name, data)
		}
		if strings.HasPrefix(name, "golden/") {
			assert.NoError(t, goErr, name)
		}
		if strings.HasPrefix(name, "hostile/") {
			assert.Error(t, goErr, name)
		}
	}
	return accepted
}
