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

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

type fakeMPSDaemons []prepare.MPSDaemonStatus

func (f fakeMPSDaemons) MPSDaemons(context.Context) []prepare.MPSDaemonStatus { return f }

func TestMPSDaemonMetrics(t *testing.T) {
	const (
		gpuA = "GPU-00000000-1111-2222-3333-444444444444"
		gpuB = "GPU-55555555-1111-2222-3333-444444444444"
	)
	daemons := fakeMPSDaemons{{GPU: gpuA, Up: true, Restarts: 2}, {GPU: gpuB, Up: false}}
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(newMPSMetrics("node-1", daemons)))
	expected := `
# HELP vgpu_dra_mps_daemon_restarts_total Restarts of the GPU's MPS control daemon after it died while claims used it, since the plugin started.
# TYPE vgpu_dra_mps_daemon_restarts_total counter
vgpu_dra_mps_daemon_restarts_total{device_uuid="` + gpuA + `",node="node-1"} 2
vgpu_dra_mps_daemon_restarts_total{device_uuid="` + gpuB + `",node="node-1"} 0
# HELP vgpu_dra_mps_daemon_up 1 while the GPU's MPS control daemon, as the plugin recorded it, runs and answers a control command; 0 while it is down (being restarted, or failing to start).
# TYPE vgpu_dra_mps_daemon_up gauge
vgpu_dra_mps_daemon_up{device_uuid="` + gpuA + `",node="node-1"} 1
vgpu_dra_mps_daemon_up{device_uuid="` + gpuB + `",node="node-1"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), metricMPSDaemonUp, metricMPSDaemonRestarts))

	// Every metric is documented.
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	require.NoError(t, err)
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 2)
	for _, f := range families {
		assert.Contains(t, string(data), "| `"+f.GetName()+"` |", "docs/metrics.md documents %s", f.GetName())
	}
}
