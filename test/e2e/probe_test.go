//go:build e2e

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

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/stretchr/testify/require"
)

// probeReport is one line of cuda-probe's JSON output (one per action).
// Error is the CUresult name when the action failed.
type probeReport struct {
	Action string `json:"action"`
	UUID   string `json:"uuid"`
	Total  int64  `json:"total"`
	Free   int64  `json:"free"`
	Error  string `json:"error"`
	// Count and UUIDs are the nvml action's GPUs.
	Count int      `json:"count"`
	UUIDs []string `json:"uuids"`
}

// result is the CUresult name of a report.
func (r probeReport) result() string {
	if r.Error == "" {
		return "CUDA_SUCCESS"
	}
	return r.Error
}

// probe runs cuda-probe with the given arguments in a container and returns
// its reports. cuda-probe exits non-zero when an action fails; that is a
// result here, not an error, as long as it reported in JSON.
func (f *framework) probe(pod, container string, args ...string) []probeReport {
	f.t.Helper()
	cmd := exec.CommandContext(f.ctx, cluster.kubectl, append([]string{"--kubeconfig=" + cluster.kubeconfig,
		"exec", "-n", f.ns, pod, "-c", container, "--", "cuda-probe"}, args...)...)
	out, runErr := cmd.Output()
	reports, err := parseReports(string(out))
	require.NoError(f.t, err, "%s/%s: cuda-probe %s (exit: %v)", pod, container, strings.Join(args, " "), runErr)
	return reports
}

func parseReports(out string) ([]probeReport, error) {
	var reports []probeReport
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r probeReport
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("decode cuda-probe report %q: %w", line, err)
		}
		reports = append(reports, r)
	}
	if len(reports) == 0 {
		return nil, fmt.Errorf("cuda-probe printed no report: %q", out)
	}
	return reports, nil
}

// device checks that CUDA device dev in a container is the GPU uuid and
// returns dev for cuda-probe's --device. A container sees exactly its
// claims' GPUs, numbered from 0 in PCI bus order (CUDA_DEVICE_ORDER), so
// a test knows the ordinal: 0 for a container with one claim.
func (f *framework) device(pod, container string, dev int, uuid string) string {
	f.t.Helper()
	r := f.probe(pod, container, "--device", strconv.Itoa(dev), "info")[0]
	require.Empty(f.t, r.Error, "%s/%s: CUDA device %d", pod, container, dev)
	require.Equal(f.t, uuid, r.UUID, "%s/%s: CUDA device %d is the claim's GPU", pod, container, dev)
	return strconv.Itoa(dev)
}

// visibleGPUs lists the UUIDs of the CUDA devices a container sees, in
// ordinal order, checking that the next ordinal is refused.
func (f *framework) visibleGPUs(pod, container string) []string {
	f.t.Helper()
	var uuids []string
	// 16 is the most GPUs the fake driver simulates.
	for i := range 17 {
		r := f.probe(pod, container, "--device", strconv.Itoa(i), "info")[0]
		if r.Error != "" {
			require.Equal(f.t, "CUDA_ERROR_INVALID_DEVICE", r.Error, "%s/%s: CUDA device %d", pod, container, i)
			return uuids
		}
		uuids = append(uuids, r.UUID)
	}
	require.FailNow(f.t, "more CUDA devices than the fake driver simulates", "%s/%s", pod, container)
	return nil
}

// probeMemInfo reports cuMemGetInfo on CUDA device dev, the GPU uuid.
func (f *framework) probeMemInfo(pod, container string, dev int, uuid string) probeReport {
	f.t.Helper()
	r := f.probe(pod, container, "--device", f.device(pod, container, dev, uuid), "mem-info")
	require.Empty(f.t, r[len(r)-1].Error, "%s/%s: mem-info", pod, container)
	return r[len(r)-1]
}

// probeAlloc allocates size bytes once and returns the CUresult name.
func (f *framework) probeAlloc(pod, container string, dev int, uuid string, size int64) string {
	f.t.Helper()
	r := f.probe(pod, container, "--device", f.device(pod, container, dev, uuid), "alloc", strconv.FormatInt(size, 10))
	return r[len(r)-1].result()
}

// holder is a cuda-probe process keeping an allocation alive in a container.
type holder struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
}

func (h holder) stop() {
	h.cancel()
	_ = h.cmd.Wait()
}

// probeHold starts cuda-probe holding size bytes until stopped, and returns
// once the allocation is made.
func (f *framework) probeHold(pod, container string, devIndex int, uuid string, size int64) holder {
	f.t.Helper()
	dev := f.device(pod, container, devIndex, uuid)
	ctx, cancel := context.WithCancel(f.ctx)
	cmd := exec.CommandContext(ctx, cluster.kubectl, "--kubeconfig="+cluster.kubeconfig,
		"exec", "-n", f.ns, pod, "-c", container, "--",
		"cuda-probe", "--device", dev, "alloc", strconv.FormatInt(size, 10), "hold", "120")
	stdout, err := cmd.StdoutPipe()
	require.NoError(f.t, err)
	require.NoError(f.t, cmd.Start(), "start cuda-probe in %s/%s", pod, container)
	h := holder{cmd: cmd, cancel: cancel}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		h.stop()
		require.NoError(f.t, err, "%s/%s: read cuda-probe's allocation report", pod, container)
	}
	reports, err := parseReports(line)
	if err != nil || reports[0].result() != "CUDA_SUCCESS" {
		h.stop()
		require.FailNow(f.t, "cuda-probe could not allocate", "%s/%s: %q (%v)", pod, container, line, err)
	}
	return h
}
