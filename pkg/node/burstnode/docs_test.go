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

package burstnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstsock"
)

// Every metric the package registers has a row in docs/metrics.md.
func TestMetricsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "metrics.md"))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	n, err := New(Options{Registry: reg})
	require.NoError(t, err)
	n.metrics.refusals.WithLabelValues(burstsock.ReasonFull)
	n.metrics.reclaims.WithLabelValues(gpuA)
	n.rooms[uidA] = map[string]uint64{gpuA: gib}
	n.refs[uidA] = ClaimRef{Namespace: "ns", Name: "a", UID: uidA}
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 3)
	for _, f := range families {
		require.True(t, strings.Contains(string(data), "| `"+f.GetName()+"` |"), "docs/metrics.md documents %s", f.GetName())
	}
}
