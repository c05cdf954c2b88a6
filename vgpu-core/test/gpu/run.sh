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

# run.sh - vgpu-core on a real GPU (needs nvcc or cuda.h + nvml.h, PyTorch with CUDA, nvidia-smi).
# Run from anywhere: bash vgpu-core/test/gpu/run.sh. Takes about 5-7 minutes.
#   1. builds libvgpu.so,
#   2. checks our CUDA/NVML declarations against the real headers (static asserts),
#   3. runs PyTorch under libvgpu.so with an 8 GiB claim limit: mem_get_info, then 1 GiB
#      blocks until torch.OutOfMemoryError, with the default allocator, expandable
#      segments and the cudaMallocAsync backend,
#   4. shows nvidia-smi outside and inside (preloaded) while PyTorch holds memory,
#   5. compute limiter: 8192^3 bf16 matmul throughput at a 30 % SM limit vs no limit (expect
#      0.27-0.33 of it), then claims at 30 % and 70 % side by side with 1 and with 2
#      processes each, their achieved ratios printed next to what the simulated plant
#      (build/bench/limiter pair, the fake driver's GPU model) predicts for the same setup.
set -euo pipefail

core="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d /tmp/vgpu-gpu-XXXXXX)"
trap 'rm -rf "$work"' EXIT
limit=$((8 << 30))
step() { printf '\n=== %s\n' "$*"; }

step "build libvgpu.so"
make -C "$core" lib build/claims-ns >/dev/null
lib="$core/build/libvgpu.so"
# libvgpu.so takes limits only from read-only config mounts: claims-ns mounts
# a claims root's configs so in a private mount namespace (needs root).
ns="$core/build/claims-ns"

step "declarations vs the real cuda.h / nvml.h"
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
incs=(-I"$cuda_home/include")
gcc -std=gnu11 -I"$core/include" -I"$core/test/gpu" -o "$work/gen_ours" "$core/test/gpu/gen_ours.c"
"$work/gen_ours" >"$work/ours.h"
gcc -std=gnu11 "${incs[@]}" -I"$work" -I"$core/test/gpu" -o "$work/check_real" \
    "$core/test/gpu/check_real.c"
echo "all $(grep -cE '^(SIZE|OFF|VAL)' "$core/test/gpu/decls.def") declarations match"

step "claim: GPU 0 limited to 8 GiB"
uuid="$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')"
claims="$work/claims"
mkdir -p "$claims/gpu-test/shm"
cat >"$claims/gpu-test/config" <<CFG
version=1
claim=gpu-test
compute_policy=strict
priority=low
log_level=info
enforcement=enabled
device.count=1
device.0.uuid=$uuid
device.0.memory_limit_bytes=$limit
device.0.sm_limit_percent=0
CFG
truncate -s "$(make -s -C "$core" region-writer >/dev/null && "$core/build/region-writer" --layout \
    | awk '$1 == "VGPU_REGION_SIZE" {print $2}')" "$claims/gpu-test/shm/region"
chmod 0666 "$claims/gpu-test/shm/region"
echo "$uuid limit $limit"

export VGPU_CLAIMS_ROOT="$claims" VGPU_EXPECT_TOTAL="$limit" CUDA_VISIBLE_DEVICES=0
status=0
for conf in "" "expandable_segments:True" "backend:cudaMallocAsync"; do
    step "PyTorch, PYTORCH_CUDA_ALLOC_CONF='$conf'"
    if ! PYTORCH_CUDA_ALLOC_CONF="$conf" LD_PRELOAD="$lib" timeout 120 \
        "$ns" "$claims" python3 "$core/test/gpu/torch_limit.py"; then
        echo "FAILED"
        status=1
    fi
done

step "nvidia-smi while PyTorch holds its blocks"
mkfifo "$work/hold"
VGPU_HOLD=1 LD_PRELOAD="$lib" timeout 120 "$ns" "$claims" python3 "$core/test/gpu/torch_limit.py" \
    <"$work/hold" >"$work/held.json" &
holder=$!
exec 3>"$work/hold"
for _ in $(seq 60); do [ -s "$work/held.json" ] && break; sleep 1; done
cat "$work/held.json"
echo "--- host view (no preload)"
nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv -i 0
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
echo "--- container view (preloaded: NVML memory info shows the claim)"
LD_PRELOAD="$lib" "$ns" "$claims" nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv -i 0
exec 3>&-
wait "$holder" || status=1

# Compute limiter. One claim root per limit, so each process sees only its own claim.
compute_claim() { # NAME PERCENT
    mkdir -p "$work/$1/$1/shm"
    sed -e "s/^claim=.*/claim=$1/" -e "s/^device.0.sm_limit_percent=.*/device.0.sm_limit_percent=$2/" \
        -e "s/^device.0.memory_limit_bytes=.*/device.0.memory_limit_bytes=0/" \
        "$claims/gpu-test/config" >"$work/$1/$1/config"
    # A fresh zero-filled region of the contract size, as the kubelet plugin creates it.
    truncate -s "$(stat -c %s "$claims/gpu-test/shm/region")" "$work/$1/$1/shm/region"
    chmod 0666 "$work/$1/$1/shm/region"
}
rate_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["iters_per_s"])' "$1"; }
within() { python3 -c 'import sys; v,lo,hi=map(float,sys.argv[1:]); sys.exit(0 if lo<=v<=hi else 1)' "$@"; }
compute_claim sm30 30
compute_claim sm70 70

step "compute: 8192^3 bf16 matmul, no limit vs a 30 % SM limit"
VGPU_SECONDS=20 VGPU_WARMUP=5 timeout 120 python3 "$core/test/gpu/torch_compute.py" free \
    >"$work/free.json" || status=1
VGPU_CLAIMS_ROOT="$work/sm30" VGPU_SECONDS=30 LD_PRELOAD="$lib" timeout 120 \
    "$ns" "$work/sm30" python3 "$core/test/gpu/torch_compute.py" sm30 >"$work/sm30.json" || status=1
free_rate="$(rate_of "$work/free.json")"
ratio30="$(python3 -c "print($(rate_of "$work/sm30.json") / $free_rate)")"
echo "no limit $free_rate it/s; at 30 %: ratio $ratio30 (expect 0.27-0.33)"
within "$ratio30" 0.27 0.33 || { echo "FAILED: 30 % limit"; status=1; }

# The pair of claims at 30 % and 70 % with N processes each (N = 1, 2): achieved ratios of the
# unlimited single-process throughput, next to the simulated plant's shares for the same setup
# (one matmul is the kernel; its duration comes from the unlimited rate).
make -s -C "$core" build/bench/limiter >/dev/null
kernel_us="$(python3 -c "print(int(1e6 / $free_rate))")"
pair() { # N
    local n=$1 pids=() sum30=0 sum70=0
    for i in $(seq "$n"); do
        VGPU_CLAIMS_ROOT="$work/sm30" VGPU_SECONDS=40 LD_PRELOAD="$lib" timeout 120 \
            "$ns" "$work/sm30" python3 "$core/test/gpu/torch_compute.py" "pair30-$i" >"$work/pair30-$n-$i.json" &
        pids+=($!)
        VGPU_CLAIMS_ROOT="$work/sm70" VGPU_SECONDS=40 LD_PRELOAD="$lib" timeout 120 \
            "$ns" "$work/sm70" python3 "$core/test/gpu/torch_compute.py" "pair70-$i" >"$work/pair70-$n-$i.json" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    for i in $(seq "$n"); do
        sum30="$(python3 -c "print($sum30 + $(rate_of "$work/pair30-$n-$i.json") / $free_rate)")"
        sum70="$(python3 -c "print($sum70 + $(rate_of "$work/pair70-$n-$i.json") / $free_rate)")"
    done
    printf 'achieved  (H200/GPU):  30 %% claim %.3f, 70 %% claim %.3f, ratio 1:%.2f (ideal 1:2.33)\n' \
        "$sum30" "$sum70" "$(python3 -c "print($sum70 / max($sum30, 1e-9))")"
    printf 'simulated (plant)   :  %s\n' "$("$core/build/bench/limiter" pair "$n" "$kernel_us")"
    within "$sum30" 0.24 0.36 || { echo "FAILED: 30 % claim next to 70 % ($n processes each)"; status=1; }
    within "$sum70" 0.60 0.80 || { echo "FAILED: 70 % claim next to 30 % ($n processes each)"; status=1; }
}
step "compute: claims at 30 % and 70 % side by side, one process each"
pair 1
step "compute: claims at 30 % and 70 % side by side, two processes each"
pair 2
echo
[ "$status" = 0 ] && echo "vgpu-core GPU check: PASSED" || echo "vgpu-core GPU check: FAILED"
exit "$status"
