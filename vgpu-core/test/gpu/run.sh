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
# Run from anywhere: bash vgpu-core/test/gpu/run.sh [--fake]. Takes about 7 minutes, never more
# than 9 (the whole run is bounded, and every case has its own timeout). Installs nothing.
#   1. builds libvgpu.so and the probe (probe.c, with gcc against the real cuda.h; its kernels,
#      spin.cu, with nvcc -ptx),
#   2. checks our CUDA/NVML declarations against the real headers (static asserts),
#   3. one PASS/FAIL line each, with its figure:
#      - 8 host threads on 8 streams launching small grids (one block) of a ~2 ms spin kernel for
#        10 s under a 30 % SM limit: the busy share from 2 s on and the busiest second as the GPU
#        measured them (the kernels' own %globaltimer stamps, their union), against the limit
#        (30 +- 3, busiest <= 35); NVML's device utilisation sampled by nvidia-smi alongside;
#      - nvidia-smi inside the claim (preloaded, claim config mounted) shows the claim's 8 GiB
#        memory limit as memory.total;
#      - a VMM round under a 1 GiB limit: cuMemCreate / cuMemMap / cuMemSetAccess of 512 MiB
#        blocks, the third refused, then cuMemUnmap / cuMemRelease and a block created again;
#      - 4 x (cuMemCreate 512 MiB, export as a POSIX fd, cuMemRelease, keep the fd): NVML's used
#        memory (nvidia-smi) with the fds open and after they closed, without the library (the
#        driver keeps the memory while the fds are open); in a 1 GiB claim 2 of the 4 are made;
#      - ns per cuLaunchKernel of an empty kernel, without the library and preloaded in a claim
#        without an SM limit (added <= 200 ns or 10 %),
#   4. runs PyTorch under libvgpu.so with an 8 GiB claim limit: mem_get_info, then 1 GiB
#      blocks until torch.OutOfMemoryError, with the default allocator, expandable
#      segments and the cudaMallocAsync backend,
#   5. shows nvidia-smi outside and inside (preloaded) while PyTorch holds memory,
#   6. compute limiter: 8192^3 bf16 matmul throughput at a 30 % SM limit vs no limit (expect
#      0.27-0.33 of it), then claims at 30 % and 70 % side by side with 1 and with 2
#      processes each, their achieved ratios printed next to what the simulated plant
#      (build/bench/limiter pair, the fake driver's GPU model) predicts for the same setup,
#   7. MPS (docs/mps.md) under NVIDIA's own nvidia-cuda-mps-control, ceiling 60 %: a client's
#      memory limit (1 GiB claim, the third 512 MiB block refused) with the server listed; a 30 %
#      client that sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100 itself runs the matmul at 0.2-0.45 of
#      the unlimited rate; two processes of one-block kernels on 8 streams each complete at least
#      1.2 x as many kernels under MPS as time-sliced.
# --fake runs step 1 (the probe against vgpu-core's headers) and the cases of step 3 that need
# no kernel code against vgpu-core's fake driver, to check the script and the probe without a GPU
# (make -C vgpu-core gpu-script-test); the GPU-measured share and nvidia-smi are skipped there.
set -euo pipefail

fake=0
case "${1:-}" in
--fake) fake=1 ;;
"") ;;
*) echo "usage: run.sh [--fake]" >&2; exit 2 ;;
esac
# The whole run is bounded: 9 minutes, then everything still running is stopped.
if [ -z "${VGPU_GPU_RUN_BOUNDED:-}" ]; then
    VGPU_GPU_RUN_BOUNDED=1 exec timeout -k 10 "${VGPU_GPU_RUN_LIMIT_S:-540}" bash "$0" "$@"
fi

core="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d /tmp/vgpu-gpu-XXXXXX)"
trap 'rm -rf "$work"' EXIT
limit=$((8 << 30))
status=0
step() { printf '\n=== %s\n' "$*"; }
die() { echo "FAIL $*"; echo "vgpu-core GPU check: FAILED"; exit 1; }
# verdict NAME OK FIGURE: one PASS/FAIL line (OK is 0 for a pass).
verdict() {
    if [ "$2" = 0 ]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; status=1; fi
}
# key FILE KEY: the value of a "key value" line of the probe's output ("" if none).
key() { awk -v k="$2" '$1 == k {print $2; exit}' "$1"; }
# holds PYTHON-EXPR: 0 if the expression is true (figures compared in floating point).
holds() { python3 -c "import sys; sys.exit(0 if ($1) else 1)"; }
cuda_home="${CUDA_HOME:-/usr/local/cuda}"

if [ "$fake" = 1 ]; then
    step "build libvgpu.so, the fake driver and the probe (vgpu-core's headers)"
    make -C "$core" lib fakes build/claims-ns >/dev/null || die "build"
    export VGPU_FAKE_STATE_DIR="$work/fake-state" VGPU_FAKE_GPU_COUNT=1 VGPU_FAKE_GPU_MEMORY=16Gi \
        VGPU_FAKE_DEV_DIR="$work/fake-dev" LD_LIBRARY_PATH="$core/build/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    mkdir -p "$VGPU_FAKE_DEV_DIR"
    gcc -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$core/include" -o "$work/probe" \
        "$core/test/gpu/probe.c" -L"$core/build/fake" -Wl,-rpath,"$core/build/fake" -lcuda \
        -lpthread || die "build the probe"
    # The fake runs no kernel code: a kernel's name gives its duration.
    echo "fake module" >"$work/spin.ptx"
    spin=spin_2000us empty=empty_1us
else
    step "build libvgpu.so and the probe"
    make -C "$core" lib build/claims-ns >/dev/null || die "build libvgpu.so"
    nvcc="$(command -v nvcc || echo "$cuda_home/bin/nvcc")"
    "$nvcc" -ptx -o "$work/spin.ptx" "$core/test/gpu/spin.cu" || die "nvcc -ptx spin.cu"
    probe_cc=(gcc -std=gnu11 -D_GNU_SOURCE -DVGPU_PROBE_REAL -Wall -Wextra -I"$cuda_home/include"
        -o "$work/probe" "$core/test/gpu/probe.c")
    "${probe_cc[@]}" -lcuda -lpthread 2>/dev/null ||
        "${probe_cc[@]}" -L"$cuda_home/lib64/stubs" -lcuda -lpthread || die "build the probe"
    spin=spin empty=empty
fi
lib="$core/build/libvgpu.so"
# libvgpu.so takes limits only from read-only config mounts: claims-ns mounts
# a claims root's configs so in a private mount namespace (needs root).
ns="$core/build/claims-ns"

if [ "$fake" = 0 ]; then
    step "declarations vs the real cuda.h / nvml.h"
    incs=(-I"$cuda_home/include")
    gcc -std=gnu11 -I"$core/include" -I"$core/test/gpu" -o "$work/gen_ours" "$core/test/gpu/gen_ours.c"
    "$work/gen_ours" >"$work/ours.h"
    if gcc -std=gnu11 "${incs[@]}" -I"$work" -I"$core/test/gpu" -o "$work/check_real" \
        "$core/test/gpu/check_real.c"; then
        echo "all $(grep -cE '^(SIZE|OFF|VAL)' "$core/test/gpu/decls.def") declarations match"
    else
        echo "FAIL declarations"
        status=1
    fi
fi

step "claim: GPU 0 limited to 8 GiB"
if [ "$fake" = 1 ]; then
    uuid="$(timeout 30 "$work/probe" uuid)" || die "probe uuid"
else
    uuid="$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')"
fi
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

export CUDA_VISIBLE_DEVICES=0

# A claim of its own per case (a claims root each, so each process sees only its claim).
compute_claim() { # NAME SM_PERCENT [MEMORY_BYTES]
    mkdir -p "$work/$1/$1/shm"
    sed -e "s/^claim=.*/claim=$1/" -e "s/^device.0.sm_limit_percent=.*/device.0.sm_limit_percent=$2/" \
        -e "s/^device.0.memory_limit_bytes=.*/device.0.memory_limit_bytes=${3:-0}/" \
        "$claims/gpu-test/config" >"$work/$1/$1/config"
    # A fresh zero-filled region of the contract size, as the kubelet plugin creates it.
    truncate -s "$(stat -c %s "$claims/gpu-test/shm/region")" "$work/$1/$1/shm/region"
    chmod 0666 "$work/$1/$1/shm/region"
}
in_claim() { # ROOT TIMEOUT_S COMMAND...: the command preloaded, in the claim of ROOT
    local root=$1 t=$2
    shift 2
    VGPU_CLAIMS_ROOT="$root" LD_PRELOAD="$lib" timeout -k 5 "$t" "$ns" "$root" "$@"
}

step "8 threads on 8 streams, small grids of a 2 ms spin kernel, 30 % SM limit, 10 s"
compute_claim streams30 30
if [ "$fake" = 0 ]; then
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i 0 -lms 250 \
        >"$work/nvml-util.txt" 2>/dev/null &
    sampler=$!
fi
if in_claim "$work/streams30" 60 "$work/probe" streams "$work/spin.ptx" "$spin" 8 10 2000 2 \
    >"$work/streams.txt"; then
    cat "$work/streams.txt"
    share="$(key "$work/streams.txt" share)" peak="$(key "$work/streams.txt" peak)"
    if [ "$fake" = 1 ]; then
        n="$(key "$work/streams.txt" launches)"
        verdict "streams (fake: launches only, no kernel stamps)" "$(holds "${n:-0} > 0"; echo $?)" \
            "${n:-0} launches"
    else
        kill "$sampler" 2>/dev/null || true
        wait "$sampler" 2>/dev/null || true
        # Samples from 2 s on (four a second), as the share.
        util="$(tail -n +9 "$work/nvml-util.txt" | awk '$1 ~ /^[0-9]+$/ {s += $1; n++}
            END {if (n) printf "%.1f", s / n; else print "n/a"}')"
        verdict "streams share (GPU-measured, from 2 s)" \
            "$(holds "27 <= ${share:--1} <= 33"; echo $?)" "${share:-?} % at a 30 % limit (27-33)"
        verdict "streams busiest second (GPU-measured)" "$(holds "0 <= ${peak:--1} <= 35"; echo $?)" \
            "${peak:-?} % (<= 35); NVML device utilisation sampled alongside: $util %"
    fi
else
    verdict "streams" 1 "the probe failed or timed out"
fi
[ "$fake" = 0 ] && { kill "$sampler" 2>/dev/null || true; }

step "nvidia-smi inside the claim: the 8 GiB limit as memory.total"
if [ "$fake" = 1 ]; then
    echo "SKIP nvidia-smi in the claim (--fake: no nvidia-smi)"
elif total="$(in_claim "$claims" 30 nvidia-smi --query-gpu=memory.total \
    --format=csv,noheader,nounits -i 0 | tr -d ' ')"; then
    verdict "nvidia-smi in the claim" "$(holds "'$total' == '$((limit >> 20))'"; echo $?)" \
        "memory.total $total MiB (claim limit $((limit >> 20)) MiB)"
else
    verdict "nvidia-smi in the claim" 1 "nvidia-smi failed or timed out"
fi

step "VMM under a 1 GiB limit: 512 MiB blocks created, mapped, given access, released"
compute_claim vmm1g 0 $((1 << 30))
if in_claim "$work/vmm1g" 60 "$work/probe" vmm 512 3 >"$work/vmm.txt"; then
    cat "$work/vmm.txt"
    c1="$(key "$work/vmm.txt" created)" m1="$(key "$work/vmm.txt" mapped)"
    again="$(key "$work/vmm.txt" again)" third="$(awk '$1 == "create" && $2 == 3 {print $3}' "$work/vmm.txt")"
    verdict "VMM round under 1 GiB" \
        "$(holds "'$c1' == '2' and '$m1' == '2' and '$third' == '2' and '$again' == '0'"; echo $?)" \
        "created and mapped $c1 of 3 blocks of 512 MiB, the third refused with error ${third:-?} (2: out of memory), after release created again: error ${again:-?}"
else
    verdict "VMM round under 1 GiB" 1 "the probe failed or timed out"
fi

step "exported VMM fds hold their memory: 4 x 512 MiB created, exported, released, fds kept"
# The driver (no library): NVML's used memory with the fds open after every release, then closed.
if [ "$fake" = 1 ]; then
    echo "SKIP NVML used memory with exported fds open (--fake: no nvidia-smi)"
else
    gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '; }
    before="$(gpu_used)" open="" closed=""
    coproc HOLDER { timeout -k 5 60 "$work/probe" vmmfd 512 4; }
    # Bash drops the coprocess's variables once it is reaped: kept here.
    from_p=${HOLDER[0]} to_p=${HOLDER[1]} holder_pid=$HOLDER_PID created="" held=""
    if read -r -t 30 _ <&"$from_p" && read -r -t 30 _ <&"$from_p" &&
        read -r -t 30 _ <&"$from_p" && read -r -t 30 _ <&"$from_p" &&
        read -r -t 30 created <&"$from_p" && read -r -t 30 held <&"$from_p"; then
        open="$(gpu_used)"
        echo close >&"$to_p" || true
        if read -r -t 30 _ <&"$from_p"; then closed="$(gpu_used)"; fi
        echo exit >&"$to_p" || true
    fi
    wait "$holder_pid" 2>/dev/null || true
    verdict "exported fds hold their memory (NVIDIA's driver, no library)" \
        "$(holds "'$held' == 'held 4' and ${open:-0} - $before >= 1800 and ${closed:-99999} - $before <= 256"; echo $?)" \
        "used $before MiB before, ${open:-?} MiB with the 4 fds open after every release (${created:-?}), ${closed:-?} MiB once closed"
fi
# The library: the fds keep the claim charged, so a 1 GiB claim makes 2 of the 4.
compute_claim vmmfd1g 0 $((1 << 30))
if printf 'close\nexit\n' | in_claim "$work/vmmfd1g" 60 "$work/probe" vmmfd 512 4 >"$work/vmmfd.txt"; then
    cat "$work/vmmfd.txt"
    made="$(key "$work/vmmfd.txt" created)" third="$(awk '$1 == "create" && $2 == 3 {print $3}' "$work/vmmfd.txt")"
    verdict "exported fds stay charged under 1 GiB" "$(holds "'$made' == '2' and '$third' == '2'"; echo $?)" \
        "created $made of 4 blocks of 512 MiB whose fds stay open, the third refused with error ${third:-?} (2: out of memory)"
else
    verdict "exported fds stay charged under 1 GiB" 1 "the probe failed or timed out"
fi

step "per-launch overhead: empty kernels, without and with the library"
compute_claim nolimit 0
if timeout -k 5 60 "$work/probe" overhead "$work/spin.ptx" "$empty" 100000 >"$work/ovh-free.txt" &&
    in_claim "$work/nolimit" 60 "$work/probe" overhead "$work/spin.ptx" "$empty" 100000 \
        >"$work/ovh-lib.txt"; then
    free_ns="$(key "$work/ovh-free.txt" ns_per_launch)" lib_ns="$(key "$work/ovh-lib.txt" ns_per_launch)"
    figure="$free_ns ns without, $lib_ns ns with libvgpu.so (no SM limit): $(python3 -c "print(round($lib_ns - $free_ns, 1))") ns added"
    if [ "$fake" = 1 ]; then
        # Against the fake on a shared machine the figure is load, not the library: shown, not judged.
        echo "MEASURED per-launch overhead (--fake, not judged): $figure"
    else
        verdict "per-launch overhead" "$(holds "$lib_ns - $free_ns <= max(200, 0.1 * $free_ns)"; echo $?)" \
            "$figure (<= 200 or 10 %)"
    fi
else
    verdict "per-launch overhead" 1 "the probe failed or timed out"
fi

if [ "$fake" = 1 ]; then
    echo
    [ "$status" = 0 ] && echo "vgpu-core GPU check (--fake): PASSED" || echo "vgpu-core GPU check (--fake): FAILED"
    exit "$status"
fi

export VGPU_CLAIMS_ROOT="$claims" VGPU_EXPECT_TOTAL="$limit"
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

# MPS (docs/mps.md): NVIDIA's control daemon on this GPU, clients whose claim configs carry the
# mps.* lines that libvgpu.so turns into the MPS client settings before the driver reads them.
mps_claim() { # NAME CORES MEMORY_BYTES: an MPS claim (no time share; the server holds the SM share)
    compute_claim "$1" 0 "$3"
    printf 'mps.activeThreadPercent.0=%s\nmps.pinnedMemoryLimit.0=%s\n' "$2" "$3" >>"$work/$1/$1/config"
}
mps_ctl="$(command -v nvidia-cuda-mps-control || true)"
if [ -z "$mps_ctl" ]; then
    verdict "MPS" 1 "no nvidia-cuda-mps-control next to the driver"
else
    export CUDA_MPS_PIPE_DIRECTORY="$work/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$work/mps/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    mps_stop() { echo quit | "$mps_ctl" >/dev/null 2>&1 || true; }
    trap 'mps_stop; rm -rf "$work"' EXIT
    step "MPS: the real control daemon, ceiling 60 %"
    "$mps_ctl" -d || die "nvidia-cuda-mps-control -d"
    echo set_default_active_thread_percentage 60 | "$mps_ctl"
    mps_claim mps30 30 $((1 << 30))
    mps_claim mps60 60 $((4 << 30))

    step "MPS: a client's memory limit (1 GiB claim: 512 MiB blocks, the third refused)"
    if in_claim "$work/mps30" 60 "$work/probe" vmm 512 3 >"$work/mps-vmm.txt"; then
        servers="$(echo get_server_list | "$mps_ctl")"
        c1="$(key "$work/mps-vmm.txt" created)" third="$(awk '$1 == "create" && $2 == 3 {print $3}' "$work/mps-vmm.txt")"
        verdict "MPS client's memory limit" "$(holds "'$c1' == '2' and '$third' == '2' and '$servers' != ''"; echo $?)" \
            "created $c1 of 3 blocks of 512 MiB, the third refused with error ${third:-?}; MPS servers: ${servers:-none}"
    else
        verdict "MPS client's memory limit" 1 "the probe failed or timed out"
    fi

    step "MPS: matmul throughput of a 30 % client that asks for 100 %, vs no limit"
    if CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100 VGPU_SECONDS=20 VGPU_WARMUP=5 in_claim "$work/mps30" 120 \
        python3 "$core/test/gpu/torch_compute.py" mps30 >"$work/mps30.json"; then
        r="$(python3 -c "print($(rate_of "$work/mps30.json") / $free_rate)")"
        verdict "MPS SM share held" "$(holds "0.2 <= $r <= 0.45"; echo $?)" \
            "a 30 % client that set 100 % itself ran at $r of the GPU's matmul throughput (0.2-0.45)"
    else
        verdict "MPS SM share held" 1 "the client failed or timed out"
    fi

    step "MPS vs time-sliced: two processes of one-block 2 ms kernels on 8 streams each, 10 s"
    streams_pair() { # LABEL CLAIM_A CLAIM_B: the sum of the two processes' launches
        in_claim "$work/$2" 60 "$work/probe" streams "$work/spin.ptx" "$spin" 8 10 2000 2 >"$work/$1-a.txt" &
        local a=$!
        in_claim "$work/$3" 60 "$work/probe" streams "$work/spin.ptx" "$spin" 8 10 2000 2 >"$work/$1-b.txt" &
        local b=$!
        wait "$a" && wait "$b" || return 1
        echo $(($(key "$work/$1-a.txt" launches) + $(key "$work/$1-b.txt" launches)))
    }
    mps_claim mpsa 50 $((4 << 30))
    mps_claim mpsb 50 $((4 << 30))
    compute_claim tsa 0 $((4 << 30))
    compute_claim tsb 0 $((4 << 30))
    if mps_n="$(streams_pair mps mpsa mpsb)" && mps_stop &&
        ts_n="$(unset CUDA_MPS_PIPE_DIRECTORY; streams_pair ts tsa tsb)"; then
        verdict "MPS throughput" "$(holds "$mps_n >= 1.2 * max($ts_n, 1)"; echo $?)" \
            "$mps_n kernels under MPS, $ts_n time-sliced: $(python3 -c "print(round($mps_n / max($ts_n, 1), 2))") x (>= 1.2)"
    else
        verdict "MPS throughput" 1 "a streams client failed or timed out"
    fi
    mps_stop
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
echo
[ "$status" = 0 ] && echo "vgpu-core GPU check: PASSED" || echo "vgpu-core GPU check: FAILED"
exit "$status"
