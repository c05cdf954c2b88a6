#!/usr/bin/env bash
# Copyright 2026 The vgpu-dra Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# matrix.sh: the version matrix behind `make e2e-matrix` (docs/e2e.md#the-version-matrix).
# One row per Kubernetes version: run.sh on a fresh cluster of that version
# (each version built once into the cache), then one more row, 1.35 with
# DRAConsumableCapacity off, where the driver must report the missing gate.
# Prints, and writes to _output/e2e-matrix/table.md, each row's passed,
# skipped (with the reason) and failed specs and its wall time; each row's
# whole output is _output/e2e-matrix/<row>.log. Needs root and `make build`.
#
# Env: E2E_MATRIX_VERSIONS="v1.35.4 v1.36.3 v1.37.2 v1.38.0-beta.0"
#      E2E_MATRIX_RUN=REGEX  the specs of each row (default: one per capability
#                            of docs/install.md's version table; "all" runs
#                            the whole suite, about 18 minutes a row)
#      E2E_MATRIX_NO_GATE=0  leave out the row without DRAConsumableCapacity
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=$ROOT/_output/e2e-matrix
VERSIONS=${E2E_MATRIX_VERSIONS:-v1.35.4 v1.36.3 v1.37.2 v1.38.0-beta.0}
# Software slices, MIG, HAMi requests, extended resources, XID taints,
# usage in claim status, burst; and the missing-gate spec (skipped, with
# its reason, where the gate is on).
CAPABILITIES='^(TestTwoPodsShareGPUsUnderLimits|TestMIGInstancesIsolatedSharedAndExclusive|TestHAMiPodRunsUnderTranslatedLimits|TestExtendedResourceGetsAWholeGPU|TestXIDTaintsTheGPUUntilThePluginFindsItHealthy|TestMonitorReportsUsageInMetricsAndClaimStatus|TestBurstReclaimEvictsAndGrantsOnlyWhatIsLeft|TestMissingConsumableCapacityGateIsReported)$'
RUN=${E2E_MATRIX_RUN:-$CAPABILITIES}
[ "$RUN" = all ] && RUN=
mkdir -p "$OUT"
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
table=$OUT/table.md
{
  echo "Version matrix of commit $commit, $(date -u +%Y-%m-%d) (test/e2e/matrix.sh)"
  echo
  echo "| row | passed | skipped (reason) | failed | wall time |"
  echo "|---|---|---|---|---|"
} >"$table"

# row NAME VERSION [GATES] [RUN]: one run.sh on a fresh cluster; never stops
# the matrix, a failed row is a row of the table.
rc=0
row() {
  local name=$1 version=$2 gates=${3:-} run=${4-$RUN} log=$OUT/$1.log start=$SECONDS status=0
  echo "== $name: K8S_VERSION=$version${gates:+ E2E_FEATURE_GATES=$gates}${run:+ E2E_RUN=$run}"
  K8S_VERSION=$version E2E_FEATURE_GATES=$gates E2E_RUN=$run "$ROOT/test/e2e/run.sh" >"$log" 2>&1 || status=$?
  local wall=$((SECONDS - start)) passed skipped failed
  passed=$(sed -n 's/^--- PASS: \([^ ]*\).*/\1/p' "$log" | sort -u | paste -sd, -)
  failed=$(sed -n 's/^--- FAIL: \([^ ]*\).*/\1/p' "$log" | sort -u | paste -sd, -)
  # A skip's reason is the spec's last line before its "--- SKIP".
  skipped=$(awk '/^=== RUN/ { reason = "" } /^    [a-z_]*\.go:[0-9]*: / { reason = $0; sub(/^ *[a-z_]*\.go:[0-9]*: */, "", reason) }
    /^--- SKIP: / { print $3 " (" reason ")" }' "$log" | sort -u | paste -sd';' -)
  if [ "$status" -ne 0 ] && [ -z "$failed" ]; then
    failed="the run itself (exit $status): see $log"
  fi
  [ "$status" -eq 0 ] || rc=1
  printf '| %s | %s | %s | %s | %dm%02ds |\n' "$name" "${passed:--}" "${skipped:--}" "${failed:--}" $((wall / 60)) $((wall % 60)) >>"$table"
  echo "   passed: ${passed:--}; skipped: ${skipped:--}; failed: ${failed:--}; $((wall / 60))m$((wall % 60))s"
}

for v in $VERSIONS; do
  # Each version's default gates (lib/common.sh): 1.35 turns on the alpha ones.
  row "$v" "$v"
done
if [ "${E2E_MATRIX_NO_GATE:-1}" = 1 ]; then
  # 1.35's gates with consumable capacity off: only the spec that expects
  # the driver to report it (the others assume shared GPUs).
  row "v1.35.4-without-DRAConsumableCapacity" v1.35.4 \
    DRAConsumableCapacity=false,DRAPartitionableDevices=true,DRADeviceBindingConditions=true,DRAResourceClaimDeviceStatus=true,DRADeviceTaints=true,DRAExtendedResource=true \
    '^TestMissingConsumableCapacityGateIsReported$'
fi
echo
cat "$table"
exit "$rc"
