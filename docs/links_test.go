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

// Package docs holds the project's documentation; its tests check that every
// relative link between the Markdown files of the repository resolves, and
// that the make targets and flags the docs name exist (drift_test.go), and
// that status lives only in the README's Status section (status_test.go).
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// markdownLink matches an inline link's target: [text](target).
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading      = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	fence        = regexp.MustCompile("^\\s*(```|~~~)")
	// anchorDrop is what GitHub removes from a heading to make its anchor.
	anchorDrop = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// markdownFiles lists the repository's Markdown files outside build output
// and vendored trees.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	return repoFiles(t, root, ".md")
}

// repoFiles lists the repository's files with one of the extensions exts,
// outside build output, vendored trees and test data.
func repoFiles(t *testing.T, root string, exts ...string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "vendor", "build", "_output", "bin", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(exts, filepath.Ext(path)) {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// anchors returns the heading anchors GitHub generates for a Markdown file:
// lower case, punctuation dropped, spaces to hyphens, "-N" for repeats.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		a := strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// links returns the link targets of a Markdown text outside code blocks and
// code spans.
func links(text string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 { // even parts are outside code spans
			for _, m := range markdownLink.FindAllStringSubmatch(parts[i], -1) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

func TestRelativeLinksResolve(t *testing.T) {
	const root = ".."
	files := markdownFiles(t, root)
	require.NotEmpty(t, files)
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchorCache[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		anchorCache[path] = anchors(string(data))
		return anchorCache[path]
	}
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, target := range links(string(data)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), path)
			}
			rel, _ := filepath.Rel(root, file)
			checked++
			info, err := os.Stat(resolved)
			if !assert.NoError(t, err, "%s: link %q: target missing", rel, target) {
				continue
			}
			if anchor != "" && !info.IsDir() && strings.HasSuffix(resolved, ".md") {
				assert.True(t, anchorsOf(resolved)[anchor], "%s: link %q: no heading with anchor #%s", rel, target, anchor)
			}
		}
	}
	assert.Greater(t, checked, 50, "too few links found: is the link pattern still right?")
}

func TestAnchors(t *testing.T) {
	got := anchors("# Shared region (contract with `vgpu_region.h`)\n```\n# not a heading\n```\n## Tests\n## Tests\n")
	assert.Equal(t, map[string]bool{"shared-region-contract-with-vgpu_regionh": true, "tests": true, "tests-1": true}, got)
}
