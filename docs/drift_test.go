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

package docs

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// The checks in this file catch documentation that drifted from the code:
// a `make` target the Makefiles no longer have, a flag a binary no longer
// registers. (Metrics: deployments/grafana's TestMetricsDocumented.)

// codeSnippets returns the code of a Markdown text: each code span and each
// line of a fenced block.
func codeSnippets(text string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			out = append(out, line)
			continue
		}
		parts := strings.Split(line, "`")
		for i := 1; i < len(parts)-1; i += 2 { // odd parts are inside code spans
			out = append(out, parts[i])
		}
	}
	return out
}

// makeCall is one `make` command found in a document: the directory of the
// Makefile (relative to the repository root) and the targets it names.
type makeCall struct {
	dir     string
	targets []string
	text    string
}

var (
	shellSeparator = regexp.MustCompile(`&&|\|\||[;|()]`)
	targetWord     = regexp.MustCompile(`^[A-Za-z0-9_./%-]+$`)
)

// makeCalls parses the `make` commands of a snippet of shell in a document
// whose own Makefile is in dir (-C DIR is relative to the repository root,
// where the docs' commands run): commands are split at shell operators, a leading prompt, sudo, nice or
// variable assignment is skipped; options -C DIR, -s, -jN, -k and VAR=value
// assignments are understood, and the targets end at a comment or a word that
// is no target name.
func makeCalls(dir, snippet string) []makeCall {
	var out []makeCall
	for _, line := range strings.Split(snippet, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, command := range shellSeparator.Split(line, -1) {
			fields := strings.Fields(command)
			for len(fields) > 0 && (fields[0] == "$" || fields[0] == "sudo" || fields[0] == "nice" || strings.Contains(fields[0], "=")) {
				fields = fields[1:]
			}
			if len(fields) == 0 || fields[0] != "make" {
				continue
			}
			call := makeCall{dir: dir, text: strings.Join(fields, " ")}
		words:
			for i := 1; i < len(fields); i++ {
				f := fields[i]
				switch {
				case f == "-C" && i+1 < len(fields):
					call.dir = path.Clean(fields[i+1])
					i++
				case strings.HasPrefix(f, "-C"):
					call.dir = path.Clean(f[2:])
				case strings.HasPrefix(f, "-"):
					// -s, -k, -jN, --no-print-directory: no target
				case strings.Contains(f, "="):
					// a variable assignment
				case !targetWord.MatchString(f):
					break words // prose after the command
				default:
					call.targets = append(call.targets, f)
				}
			}
			out = append(out, call)
		}
	}
	return out
}

// makefileDir returns the directory whose Makefile a command in a document
// of dir runs: the nearest one at or above dir, up to the repository root.
func makefileDir(root, dir string) string {
	for d := dir; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if _, err := os.Stat(filepath.Join(root, d, "Makefile")); err == nil {
			return d
		}
	}
	return "."
}

// makeTargets returns the targets make knows in the Makefile of dir, as make
// itself reads them (variables expanded, included files read), without
// running any recipe: exact names and the patterns of pattern rules.
func makeTargets(t *testing.T, dir string) (exact map[string]bool, patterns []string) {
	t.Helper()
	cmd := exec.Command("make", "-C", dir, "--no-print-directory", "-nprRq", ".DEFAULT")
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	out, _ := cmd.Output() // -q exits non-zero when .DEFAULT is "out of date"
	require.NotEmpty(t, out, "make -p printed no database for %s", dir)
	exact = map[string]bool{}
	inFiles, notTarget := false, false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "# Files":
			inFiles = true
			continue
		case strings.HasPrefix(line, "# files hash-table stats"):
			inFiles = false
		case line == "# Not a target:":
			notTarget = true
			continue
		}
		if !inFiles || line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "\t") {
			continue
		}
		head, _, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line[len(head):], ":=") {
			continue
		}
		if !notTarget {
			for _, name := range strings.Fields(head) {
				if strings.Contains(name, "%") {
					patterns = append(patterns, name)
				} else {
					exact[name] = true
				}
			}
		}
		notTarget = false
	}
	require.NoError(t, sc.Err())
	return exact, patterns
}

// matchPattern reports whether name matches a make pattern with one %.
func matchPattern(pattern, name string) bool {
	prefix, suffix, _ := strings.Cut(pattern, "%")
	return len(name) > len(prefix)+len(suffix) && strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix)
}

func TestMakeTargetsInDocsExist(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed to read the Makefiles: %v", err)
	}
	const root = ".."
	type known struct {
		exact    map[string]bool
		patterns []string
	}
	makefiles := map[string]known{}
	checked := 0
	for _, file := range markdownFiles(t, root) {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, file)
		dir := makefileDir(root, filepath.ToSlash(filepath.Dir(rel)))
		for _, snippet := range codeSnippets(string(data)) {
			for _, call := range makeCalls(dir, snippet) {
				if _, err := os.Stat(filepath.Join(root, call.dir, "Makefile")); !assert.NoError(t, err, "%s: %q: no Makefile in %s", rel, call.text, call.dir) {
					continue
				}
				k, ok := makefiles[call.dir]
				if !ok {
					k.exact, k.patterns = makeTargets(t, filepath.Join(root, call.dir))
					makefiles[call.dir] = k
				}
				for _, target := range call.targets {
					checked++
					found := k.exact[target]
					for _, p := range k.patterns {
						found = found || matchPattern(p, target)
					}
					assert.True(t, found, "%s: %q: the Makefile in %s has no target %q", rel, call.text, call.dir, target)
				}
			}
		}
	}
	assert.Greater(t, checked, 20, "too few make targets found: is the pattern still right?")
}

func TestMakeCalls(t *testing.T) {
	got := makeCalls("docs", "sudo make -s -C vgpu-core FUZZTIME=1m lint unit-test && make e2e # then make demo\n$ make\nmake it faster")
	require.Len(t, got, 4)
	assert.Equal(t, "vgpu-core", got[0].dir)
	assert.Equal(t, []string{"lint", "unit-test"}, got[0].targets)
	assert.Equal(t, "docs", got[1].dir)
	assert.Equal(t, []string{"e2e"}, got[1].targets)
	assert.Empty(t, got[2].targets)
	assert.Equal(t, []string{"it", "faster"}, got[3].targets, "prose in a code span reads as targets (and fails the check)")
	assert.Equal(t, "vgpu-core", makefileDir("..", "vgpu-core/test"))
	assert.Equal(t, ".", makefileDir("..", "docs"))
	assert.True(t, matchPattern("bin/%", "bin/dra-controller"))
	assert.False(t, matchPattern("bin/%", "bin/"))
}

// registeredFlags returns the flags a binary registers: every flag-defining
// call (fs.XxxVar, fs.XxxVarP, fs.Var, flags.QuantityVar) with a literal name
// in the Go files of dirs, plus the logging flags that pkg/common/daemon adds from
// k8s.io/component-base.
func registeredFlags(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	defining := regexp.MustCompile(`^(Var|VarP|[A-Z][A-Za-z0-9]*VarP?)$`)
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "no Go files in %s", dir)
		fset := token.NewFileSet()
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, 0)
			require.NoError(t, err)
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !defining.MatchString(sel.Sel.Name) {
					return true
				}
				for _, arg := range call.Args { // the first string literal is the name
					if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if name, err := strconv.Unquote(lit.Value); err == nil {
							out[name] = true
						}
						break
					}
				}
				return true
			})
		}
	}
	logging := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logsapi.AddFlags(logsapi.NewLoggingConfiguration(), logging)
	logging.VisitAll(func(f *pflag.Flag) { out[f.Name] = true })
	out["help"] = true // pflag's own
	return out
}

var (
	docFlag = regexp.MustCompile(`(?:^|[\s(,])--([a-z][a-z0-9-]*(?:\{[a-z0-9,-]+\}[a-z0-9-]*)?\*?)`)
	braces  = regexp.MustCompile(`\{([a-z0-9,-]+)\}`)
)

// docFlags returns the flags a document names in its code: "--a-{b,c}" is
// --a-b and --a-c, "--a-*" any flag starting with --a-.
func docFlags(text string) []string {
	var out []string
	for _, snippet := range codeSnippets(text) {
		for _, m := range docFlag.FindAllStringSubmatch(snippet, -1) {
			name := m[1]
			if b := braces.FindStringSubmatchIndex(name); b != nil {
				for _, alt := range strings.Split(name[b[2]:b[3]], ",") {
					out = append(out, name[:b[0]]+alt+name[b[1]:])
				}
				continue
			}
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func TestDocFlags(t *testing.T) {
	assert.Equal(t, []string{"a", "b-c", "b-d", "e-*", "f"}, docFlags("`--a`, `--b-{c,d}` and `--e-*`\n```\nplugin --f=1\n```\nnot --code"))
}

func TestFlagsInDocsExist(t *testing.T) {
	for doc, dirs := range map[string][]string{
		"kubelet-plugin.md": {"../cmd/dra-kubelet-plugin", "../pkg/common/daemon"},
		"controller.md":     {"../cmd/dra-controller", "../pkg/common/daemon"},
	} {
		t.Run(doc, func(t *testing.T) {
			registered := registeredFlags(t, dirs...)
			require.Contains(t, registered, "kubeconfig", "pkg/common/daemon's flags were not found")
			data, err := os.ReadFile(doc)
			require.NoError(t, err)
			named := docFlags(string(data))
			assert.Greater(t, len(named), 5, "too few flags found: is the pattern still right?")
			for _, name := range named {
				found := registered[name]
				if prefix, ok := strings.CutSuffix(name, "*"); ok {
					for r := range registered {
						found = found || strings.HasPrefix(r, prefix)
					}
				}
				assert.True(t, found, "%s names --%s, which the binary does not register", doc, name)
			}
		})
	}
}
