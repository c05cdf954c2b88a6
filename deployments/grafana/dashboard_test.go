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

package grafana

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var metricName = regexp.MustCompile(`\bvgpu_dra_[a-z0-9_]+`)

// exported collects the metric names the Go code registers: string
// literals that are exactly a vgpu_dra_* name, in non-test files of cmd/
// and pkg/. A histogram also exports its _bucket, _sum and _count series.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, root := range []string{"../../cmd", "../../pkg"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err == nil && s != "" && metricName.FindString(s) == s {
					names[s] = true
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						names[s+suffix] = true
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, names, "no metric names found in the code")
	return names
}

// dashboardQueries returns every PromQL expression of the dashboard:
// panel targets and templating queries.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("vgpu-dra-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(data, &dash), "the dashboard is JSON")
	var out []string
	for _, p := range dash.Panels {
		for _, tgt := range p.Targets {
			require.NotEmpty(t, tgt.Expr, "panel %q has a target without expr", p.Title)
			out = append(out, tgt.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			out = append(out, v.Definition)
		}
	}
	return out
}

func TestDashboardUsesExportedMetrics(t *testing.T) {
	names := exported(t)
	queries := dashboardQueries(t)
	require.NotEmpty(t, queries)
	for _, q := range queries {
		used := metricName.FindAllString(q, -1)
		assert.NotEmpty(t, used, "query %q names no vgpu_dra_ metric", q)
		for _, m := range used {
			assert.True(t, names[m], "dashboard query %q uses %s, which the code does not export", q, m)
		}
	}
}

func TestCookbookUsesExportedMetrics(t *testing.T) {
	names := exported(t)
	data, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(string(data), -1)
	require.NotEmpty(t, blocks, "docs/metrics.md has a promql cookbook")
	for _, b := range blocks {
		for _, m := range metricName.FindAllString(b[1], -1) {
			assert.True(t, names[m], "docs/metrics.md's cookbook uses %s, which the code does not export", m)
		}
	}
}

// The check itself must catch a misspelt name.
func TestUnknownMetricIsCaught(t *testing.T) {
	names := exported(t)
	assert.False(t, names["vgpu_dra_claim_memory_usage_bytes"])
	assert.False(t, names[""], "an empty literal is no metric name")
	assert.True(t, names["vgpu_dra_claim_memory_used_bytes"])
	assert.True(t, names["vgpu_dra_monitor_collection_duration_seconds_bucket"])
}

// TestMetricsDocumented: every metric the code registers has a row in
// docs/metrics.md's tables (a backquoted name at the start of a row).
func TestMetricsDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(vgpu_dra_[a-z0-9_]+)").FindAllStringSubmatch(string(data), -1) {
		documented[m[1]] = true
	}
	require.NotEmpty(t, documented, "docs/metrics.md has metric tables")
	for name := range exported(t) {
		if strings.HasSuffix(name, "_bucket") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") {
			continue // series of a histogram, documented under its name
		}
		assert.True(t, documented[name], "the code registers %s, which docs/metrics.md does not document", name)
	}
}
