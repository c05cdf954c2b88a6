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
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The project's status (what is built, what is not) lives in one place, the
// README's Status section; every other document is reference, and a status
// word elsewhere is a statement that goes stale unseen.

var (
	// statusProse matches the status words in a document's prose.
	statusProse = regexp.MustCompile(`(?i)\b(not (built )?yet built|not built yet|planned|being built|in progress|until this lands|to be written)\b`)
	// statusComment matches the status words in a source comment: fewer,
	// since code says "planned" (a plan's result) and "in progress" (a
	// change under way) of its own state.
	statusComment = regexp.MustCompile(`(?i)\b(not yet built|not built yet|until this lands|to be written|designs? in progress)\b`)
	// statusHeading matches a heading, or a paragraph's lead, that holds
	// status.
	statusHeading = regexp.MustCompile(`(?i)^(#{1,6}\s+(status|what is left)\s*$|\**status( \(|:))`)
)

// statusSection is the heading of the one section that holds status.
const statusSection = "## Status"

// prose returns the lines of a Markdown text outside fenced blocks with
// their code spans removed, numbered from 1; in the README, the Status
// section is left out.
func prose(text string, isReadme bool) map[int]string {
	out := map[int]string{}
	inFence, inStatus := false, false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "# ") {
			inStatus = isReadme && strings.TrimSpace(line) == statusSection
		}
		if inStatus {
			continue
		}
		parts := strings.Split(line, "`")
		var kept []string
		for j := 0; j < len(parts); j += 2 { // even parts are outside code spans
			kept = append(kept, parts[j])
		}
		out[i+1] = strings.Join(kept, " ")
	}
	return out
}

func TestProse(t *testing.T) {
	got := prose("# T\nplanned `planned`\n```\nplanned\n```\n## Status\nnot built yet\n## Next\nin progress\n", true)
	assert.Equal(t, map[int]string{1: "# T", 2: "planned  ", 8: "## Next", 9: "in progress", 10: ""}, got)
	assert.Contains(t, prose("## Status\nnot built yet\n", false), 2, "only the README's Status section holds status")
}

func TestStatusWords(t *testing.T) {
	for _, tc := range []struct {
		text        string
		prose, code bool
	}{
		{"MPS inside a MIG instance is not built yet.", true, true},
		{"How the plugin learns the gate (planned): a flag", true, false},
		{"Memory limits: Being built.", true, false},
		{"## Designs in progress", true, true},
		{"the fallback stays until this lands", true, true},
		{"the library's parser, to be written like hostpids.c", true, true},
		{"a prepare in progress in another plugin instance", true, false},
		{"the longest kernel the limiter allows for", false, false},
		{"unplanned", false, false},
	} {
		assert.Equal(t, tc.prose, statusProse.MatchString(tc.text), "prose: %q", tc.text)
		assert.Equal(t, tc.code, statusComment.MatchString(tc.text), "comment: %q", tc.text)
	}
	assert.True(t, statusHeading.MatchString("## What is left"))
	assert.True(t, statusHeading.MatchString("## Status"))
	assert.True(t, statusHeading.MatchString("Status: designed; nothing is published"))
	assert.True(t, statusHeading.MatchString("**Status (mps.md):** built"))
	assert.False(t, statusHeading.MatchString("## Status of a claim"))
	assert.False(t, statusHeading.MatchString("The claim's status: prepared"))
}

func TestStatusOnlyInTheReadme(t *testing.T) {
	const root = ".."
	files := markdownFiles(t, root)
	require.NotEmpty(t, files)
	statusSections := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, file)
		isReadme := rel == "README.md"
		lines := prose(string(data), isReadme)
		for n, line := range lines {
			if m := statusProse.FindString(line); m != "" {
				assert.Fail(t, "status outside the README's Status section", "%s:%d: %q: say what is (reference), and list what is not built in README.md's Status section", rel, n, m)
			}
			if statusHeading.MatchString(line) {
				assert.Fail(t, "status section outside the README", "%s:%d: %q: the README's Status section is the one place for status", rel, n, line)
			}
		}
		if isReadme {
			statusSections = strings.Count(string(data), "\n"+statusSection+"\n")
		}
	}
	assert.Equal(t, 1, statusSections, "README.md has no %q section", statusSection)
}

// sourceComments returns the comment lines of a Go, C or shell source file,
// numbered from 1: lines that start a comment (//, /*, *, #) and the text
// after a trailing // or /*.
func sourceComments(text string) map[int]string {
	out := map[int]string{}
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "//"), strings.HasPrefix(trimmed, "/*"), strings.HasPrefix(trimmed, "*"), strings.HasPrefix(trimmed, "#"):
			out[i+1] = trimmed
		default:
			if j := strings.Index(line, "//"); j >= 0 {
				out[i+1] = line[j:]
			} else if j := strings.Index(line, "/*"); j >= 0 {
				out[i+1] = line[j:]
			}
		}
	}
	return out
}

func TestNoStatusInSourceComments(t *testing.T) {
	const root = ".."
	files := repoFiles(t, root, ".go", ".c", ".h", ".sh")
	assert.Greater(t, len(files), 200, "too few source files found: is the walk still right?")
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		if rel == filepath.Join("docs", "status_test.go") { // the words themselves
			continue
		}
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		for n, c := range sourceComments(string(data)) {
			if m := statusComment.FindString(c); m != "" {
				assert.Fail(t, "status in a source comment", "%s:%d: %q: comments say why; status lives in README.md's Status section", rel, n, m)
			}
		}
	}
}
