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

# run.sh - NVIDIA's CUDA runtime (libcudart12) and cuBLAS (libcublas12) as
# a test client of libvgpu.so (make -C vgpu-core cudart-test).
#
# The packages come from Debian's non-free archive (suite VGPU_CUDART_SUITE,
# default trixie), fetched with apt into a private directory (VGPU_CUDART_DIR,
# default build/cudart) with its own sources list, lists and cache: the
# machine's apt sources and dpkg state are never touched. The mirror is the
# Debian archive the machine's apt sources name (test/lib/apt_mirror.sh), or
# VGPU_CUDART_MIRROR. Fetched once, then reused. Where apt, the network or the packages are not available the test
# is skipped with a message saying why.
#
# Against the fake driver the runtime stops at NVIDIA's private export table
# (cudaErrorNotSupported), but first it resolves its entry points through
# cuGetProcAddress_v2. The client (test/cudart/client.c) runs with and
# without libvgpu.so preloaded (a 1 GiB limit on GPU 0); the two outputs must
# be identical, both runs must exit 0 within VGPU_CUDART_RUN_TIMEOUT seconds
# (default 60), and the runtime's lookups must have reached our resolver.
# Every network step is bounded by VGPU_CUDART_FETCH_TIMEOUT (default 300 s).
set -u

core="$(cd "$(dirname "$0")/../.." && pwd)"
build="$core/build"
cache="${VGPU_CUDART_DIR:-$build/cudart}"
suite="${VGPU_CUDART_SUITE:-trixie}"
mirror="${VGPU_CUDART_MIRROR:-}"
fetch_timeout="${VGPU_CUDART_FETCH_TIMEOUT:-300}"
run_timeout="${VGPU_CUDART_RUN_TIMEOUT:-60}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
client="$build/cudart-client"

# shellcheck source=../lib/skip.sh
. "$core/test/lib/skip.sh"
skip() { skipped cudart-test "$@"; }
fail() {
    echo "FAIL cudart-test: $*" >&2
    exit 1
}

libdir() {
    find "$cache/root" -name libcudart.so.12 -printf '%h\n' 2>/dev/null | head -n 1
}

fetch() {
    local apt="$cache/apt" opts
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
        skip "needs apt-get and dpkg-deb (a Debian-based machine) to fetch libcudart12"
    [ -r "$keyring" ] || skip "needs $keyring to verify Debian's archive"
    [ -n "$mirror" ] || mirror="$("$core/test/lib/apt_mirror.sh")" ||
        skip "no Debian archive in this machine's apt sources (set VGPU_CUDART_MIRROR or VGPU_DEBIAN_MIRROR)"
    rm -rf "$apt" "$cache/debs" "$cache/root"
    mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/sources.d" "$cache/debs" \
        "$cache/root" || fail "cannot create $cache"
    echo "deb [signed-by=$keyring] $mirror $suite non-free" >"$apt/sources.list"
    : >"$apt/status"
    opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/sources.d"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "Dir::State::Status=$apt/status"
        -o "APT::Sandbox::User=root" -o "Acquire::Retries=1")
    echo "fetching libcudart12, libcublas12, libcublaslt12 from $mirror $suite non-free into $cache"
    timeout "$fetch_timeout" apt-get -qq "${opts[@]}" update >"$cache/fetch.log" 2>&1 ||
        skip "cannot fetch Debian $suite non-free package lists (see $cache/fetch.log)"
    (cd "$cache/debs" && timeout "$fetch_timeout" apt-get -qq "${opts[@]}" download \
        libcudart12 libcublas12 libcublaslt12) >>"$cache/fetch.log" 2>&1 ||
        skip "cannot download libcudart12/libcublas12 from Debian $suite (see $cache/fetch.log)"
    for deb in "$cache"/debs/*.deb; do
        dpkg-deb -x "$deb" "$cache/root" || fail "cannot unpack $deb"
    done
}

[ -x "$client" ] || fail "$client missing (make -C vgpu-core cudart-test builds it)"
# Fetched under an exclusive lock: test/realdrv/run.sh reads the runtime from
# the same cache (under a shared one), perhaps at the same time (make -j).
mkdir -p "$(dirname "$cache")" && exec 9>"$cache.lock" && flock -x 9 ||
    fail "cannot lock $cache.lock"
lib="$(libdir)"
if [ -z "$lib" ] || [ ! -e "$lib/libcublas.so.12" ]; then
    fetch
    lib="$(libdir)"
fi
exec 9>&-
[ -n "$lib" ] && [ -e "$lib/libcublas.so.12" ] || fail "packages unpacked without libcudart.so.12/libcublas.so.12"

work="$(mktemp -d /tmp/vgpu-cudart-XXXXXX)"
trap 'rm -rf "$work"' EXIT
export VGPU_FAKE_STATE_DIR="$work/state" VGPU_FAKE_GPU_COUNT=2 VGPU_FAKE_GPU_MEMORY=16Gi \
    VGPU_FAKE_DEV_DIR="$work/dev"
export LD_LIBRARY_PATH="$build/fake:$lib"

run() { # name, extra env...
    local name="$1" rc
    shift
    env "$@" timeout "$run_timeout" "$client" "$lib/libcudart.so.12" "$lib/libcublas.so.12" \
        >"$work/$name.out" 2>"$work/$name.err"
    rc=$?
    [ "$rc" -ne 124 ] || fail "$name run hung (killed after ${run_timeout}s)"
    [ "$rc" -eq 0 ] || { cat "$work/$name.err" >&2; fail "$name run exited $rc"; }
}

run plain
run preloaded LD_PRELOAD="$build/libvgpu.so" CUDA_DEVICE_MEMORY_LIMIT_0=1g LIBCUDA_LOG_LEVEL=debug
if ! diff -u "$work/plain.out" "$work/preloaded.out"; then
    fail "the runtime's results differ with libvgpu.so preloaded"
fi
! grep -q "ERROR" "$work/preloaded.err" || { cat "$work/preloaded.err" >&2; fail "libvgpu.so logged an error"; }
wrapped="$(grep -c 'wrapped by' "$work/preloaded.err")"
resolver="$(grep -c 'cuGetProcAddress(cuGetProcAddress, [0-9]*, 0): wrapped by cuGetProcAddress' "$work/preloaded.err")"
[ "$resolver" -ge 1 ] || fail "the runtime never asked our resolver for cuGetProcAddress"
[ "$wrapped" -ge 20 ] || fail "only $wrapped of the runtime's lookups were wrapped"
cat "$work/preloaded.out"
echo "ok   cudart-test: CUDA runtime $(basename "$(readlink -f "$lib/libcudart.so.12")") and cuBLAS," \
    "same results with and without libvgpu.so, $wrapped entry points wrapped"
