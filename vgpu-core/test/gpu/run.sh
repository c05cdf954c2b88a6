#!/usr/bin/env bash
# run.sh - vgpu-core on a real GPU (needs nvcc or cuda.h + nvml.h, PyTorch with CUDA, nvidia-smi).
# Run from anywhere: bash vgpu-core/test/gpu/run.sh. Takes about 3-5 minutes.
#   1. builds libvgpu.so,
#   2. checks our CUDA/NVML declarations against the real headers (static asserts),
#   3. runs PyTorch under libvgpu.so with an 8 GiB claim limit: mem_get_info, then 1 GiB
#      blocks until torch.OutOfMemoryError, with the default allocator, expandable
#      segments and the cudaMallocAsync backend,
#   4. shows nvidia-smi outside and inside (preloaded) while PyTorch holds memory.
set -euo pipefail

core="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d /tmp/vgpu-gpu-XXXXXX)"
trap 'rm -rf "$work"' EXIT
limit=$((8 << 30))
step() { printf '\n=== %s\n' "$*"; }

step "build libvgpu.so"
make -C "$core" lib >/dev/null
lib="$core/build/libvgpu.so"

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
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')" "$claims/gpu-test/shm/region"
chmod 0666 "$claims/gpu-test/shm/region"
echo "$uuid limit $limit"

export VGPU_CLAIMS_ROOT="$claims" VGPU_EXPECT_TOTAL="$limit" CUDA_VISIBLE_DEVICES=0
status=0
for conf in "" "expandable_segments:True" "backend:cudaMallocAsync"; do
    step "PyTorch, PYTORCH_CUDA_ALLOC_CONF='$conf'"
    if ! PYTORCH_CUDA_ALLOC_CONF="$conf" LD_PRELOAD="$lib" timeout 120 \
        python3 "$core/test/gpu/torch_limit.py"; then
        echo "FAILED"
        status=1
    fi
done

step "nvidia-smi while PyTorch holds its blocks"
mkfifo "$work/hold"
VGPU_HOLD=1 LD_PRELOAD="$lib" timeout 120 python3 "$core/test/gpu/torch_limit.py" \
    <"$work/hold" >"$work/held.json" &
holder=$!
exec 3>"$work/hold"
for _ in $(seq 60); do [ -s "$work/held.json" ] && break; sleep 1; done
cat "$work/held.json"
echo "--- host view (no preload)"
nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv -i 0
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
echo "--- container view (preloaded: NVML memory info shows the claim)"
LD_PRELOAD="$lib" nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv -i 0
exec 3>&-
wait "$holder" || status=1
echo
[ "$status" = 0 ] && echo "vgpu-core GPU check: PASSED" || echo "vgpu-core GPU check: FAILED"
exit "$status"
