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

# demo/run.sh: the one-command demo behind `make demo`. Brings up (or reuses)
# the local single-node cluster of test/e2e, installs the vgpu-dra driver on
# two simulated GPUs, runs pods that share them under different limits, and
# prints what is where: GPUs and capacity, claims and their allocations, each
# pod's limits and live GPU memory use. Needs root and `make build`.
#
#   demo/run.sh          up + install + deploy + show
#   demo/run.sh show     print the picture again (live usage changes)
#   demo/run.sh down     remove the demo and stop the cluster (`make demo-down`)
set -euo pipefail

DEMO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../test/e2e/lib/common.sh
source "$DEMO_DIR/../test/e2e/lib/common.sh"

NS=vgpu-demo
DEMO_PODS=(notebook-1 notebook-2 trainer inference)

# to_bytes converts Kubernetes quantities (4Gi, 512Mi, 30, 1500M) to numbers.
to_bytes() {
  awk -v q="$1" 'BEGIN {
    n = q + 0; u = substr(q, length(n "") + 1)
    m["Ki"] = 2^10; m["Mi"] = 2^20; m["Gi"] = 2^30; m["Ti"] = 2^40
    m["k"] = 1e3; m["M"] = 1e6; m["G"] = 1e9; m["T"] = 1e12
    printf "%.0f\n", (u in m) ? n * m[u] : n }'
}
human() { awk -v b="$1" 'BEGIN { if (b >= 2^30) printf "%.1fGi", b / 2^30; else printf "%.0fMi", b / 2^20 }'; }

deploy() {
  kc apply -f "$DEMO_DIR/manifests/" >/dev/null
  local p
  for p in "${DEMO_PODS[@]}"; do
    if ! kc -n "$NS" wait --for=condition=Ready "pod/$p" --timeout=120s >/dev/null; then
      kc -n "$NS" describe pod "$p" >&2
      "$E2E_ROOT/driver.sh" logs 30 >&2 || true
      die "pod $p did not become Ready within 120s"
    fi
  done
  # The monitor samples every few seconds; give it the time to see each pod's
  # allocation, so the first picture already has the driver's view.
  wait_for "the driver's monitor to report every demo claim's use" 30 _monitor_sees_all ||
    log "continuing without the monitor's numbers"
}

_monitor_sees_all() {
  local c
  METRICS=$(curl -sf "http://$E2E_PLUGIN_HTTP/metrics") || return 1
  for c in $(kc get resourceclaims -n "$NS" -o jsonpath='{.items[*].metadata.name}'); do
    [ "$(monitor_used "$c")" != - ] || return 1
  done
}

show_gpus() {
  printf '\n== Simulated GPUs on node %s (ResourceSlice of driver vgpu.dra.dev) ==\n' "$E2E_NODE_NAME"
  # Allocated capacity per device, summed over every claim's allocation.
  local alloc
  alloc=$(kc get resourceclaims -A -o jsonpath='{range .items[*]}{range .status.allocation.devices.results[*]}{.device}{" "}{.consumedCapacity.memory}{" "}{.consumedCapacity.cores}{"\n"}{end}{end}')
  printf '%-7s %-42s %-24s %10s %10s %6s %10s\n' DEVICE UUID PRODUCT MEMORY ALLOCATED CORES ALLOCATED
  kc get resourceslices --field-selector spec.driver=vgpu.dra.dev \
    -o jsonpath='{range .items[*].spec.devices[*]}{.name}{"|"}{.attributes.uuid.string}{"|"}{.attributes.productName.string}{"|"}{.capacity.memory.value}{"|"}{.capacity.cores.value}{"\n"}{end}' |
    while IFS='|' read -r name uuid product mem cores; do
      local used_mem=0 used_cores=0 d m c
      while read -r d m c; do
        [ "$d" = "$name" ] || continue
        used_mem=$((used_mem + $(to_bytes "${m:-0}")))
        used_cores=$((used_cores + ${c:-0}))
      done <<<"$alloc"
      printf '%-7s %-42s %-24.24s %10s %10s %6s %10s\n' "$name" "$uuid" "$product" \
        "$(human "$(to_bytes "$mem")")" "$(human "$used_mem")" "$cores" "$used_cores"
    done
}

# monitor_used CLAIM prints the claim's memory use as the plugin's monitor
# reports it in vgpu_dra_claim_memory_used_bytes ($METRICS holds the page),
# or "-" when it reports none.
monitor_used() {
  local v
  v=$(awk -v c="claim=\"$1\"" -v ns="namespace=\"$NS\"" \
    'index($0, "vgpu_dra_claim_memory_used_bytes{") == 1 && index($0, c) && index($0, ns) {print $NF; exit}' <<<"$METRICS")
  if [ -n "$v" ]; then human "$v"; else echo -; fi
}

show_claims() {
  printf '\n== Claims, their allocations, and their use as the driver'"'"'s monitor reports it ==\n'
  printf '%-34s %-12s %-7s %10s %6s %10s  %s\n' CLAIM POD DEVICE MEMORY CORES USED SHARE-ID
  METRICS=$(curl -sf "http://$E2E_PLUGIN_HTTP/metrics" || true)
  kc get resourceclaims -n "$NS" -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.status.reservedFor[0].name}{"|"}{range .status.allocation.devices.results[*]}{.device}{"|"}{.consumedCapacity.memory}{"|"}{.consumedCapacity.cores}{"|"}{.shareID}{end}{"\n"}{end}' |
    while IFS='|' read -r claim pod dev mem cores share; do
      printf '%-34s %-12s %-7s %10s %6s %10s  %s\n' "$claim" "${pod:--}" "${dev:--}" "${mem:--}" "${cores:--}" \
        "$(monitor_used "$claim")" "${share:--}"
    done
}

show_pods() {
  printf '\n== Pods: limits seen inside the container, and live GPU memory use ==\n'
  printf '%-12s %-8s %-10s %-9s %10s %10s  %s\n' POD STATUS MEM-LIMIT SM-LIMIT USED FREE "LAST REPORT"
  local p status envs limit sm info total free report
  for p in "${DEMO_PODS[@]}"; do
    status=$(kc -n "$NS" get pod "$p" -o jsonpath='{.status.phase}' 2>/dev/null || echo Missing)
    if [ "$status" != Running ]; then
      printf '%-12s %-8s\n' "$p" "$status"
      continue
    fi
    envs=$(kc -n "$NS" exec "$p" -- env)
    limit=$(sed -n 's/^CUDA_DEVICE_MEMORY_LIMIT_0=//p' <<<"$envs")
    sm=$(sed -n 's/^CUDA_DEVICE_SM_LIMIT_0=//p' <<<"$envs")
    # cuMemGetInfo through libvgpu: total is the limit, total - free what the claim uses.
    info=$(kc -n "$NS" exec "$p" -- cuda-probe --device 0 mem-info | tail -n 1)
    total=$(sed -n 's/.*"total": *\([0-9]*\).*/\1/p' <<<"$info")
    free=$(sed -n 's/.*"free": *\([0-9]*\).*/\1/p' <<<"$info")
    report=$(kc -n "$NS" logs "$p" 2>/dev/null | sed -n 's/^past the limit: .*"error":"\([A-Z_]*\)".*/past the limit: \1/p')
    printf '%-12s %-8s %-10s %-9s %10s %10s  %s\n' "$p" "$status" "$limit" "${sm}%" \
      "$(human $((total - free)))" "$(human "$free")" "$report"
  done
}

show() {
  show_gpus
  show_claims
  show_pods
  printf '\nEach pod first tried to allocate more than its limit (see: kubectl -n %s logs POD),\n' "$NS"
  printf 'got CUDA_ERROR_OUT_OF_MEMORY, then keeps the allocation shown above.\n'
  printf 'The driver reports the same use in each claim'"'"'s status (kubectl -n %s describe resourceclaims)\n' "$NS"
  printf 'and as Prometheus metrics on http://%s/metrics.\n' "$E2E_PLUGIN_HTTP"
  printf 'KUBECONFIG=%s; make demo-down removes everything.\n' "$E2E_KUBECONFIG"
}

case "${1:-up}" in
  up)
    say_versions
    require_root
    t0=$SECONDS
    "$E2E_ROOT/cluster.sh" up
    if ! "$E2E_ROOT/driver.sh" status; then "$E2E_ROOT/driver.sh" install; fi
    deploy
    log "demo ready after $((SECONDS - t0))s"
    show
    ;;
  show) show ;;
  down)
    require_root
    if "$E2E_ROOT/cluster.sh" status; then kc delete namespace "$NS" --ignore-not-found --timeout=60s >/dev/null || true; fi
    "$E2E_ROOT/cluster.sh" down
    ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
