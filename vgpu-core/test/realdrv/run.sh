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

# run.sh - NVIDIA's real userspace driver libraries (libcuda1, libnvidia-ml1,
# libnvidia-ptxjitcompiler1) as a test client of libvgpu.so
# (make -C vgpu-core realdrv-test).
#
# The packages come from Debian's non-free archive, one driver version per
# suite (VGPU_REALDRV_SUITES, default "bookworm trixie": 535.x and 550.x),
# fetched with apt into a private directory (VGPU_REALDRV_DIR, default
# build/realdrv/<suite>) with its own sources list, lists and cache: the
# machine's apt sources and dpkg state are never touched. The mirror is the
# Debian archive the machine's apt sources name (test/lib/apt_mirror.sh;
# VGPU_DEBIAN_MIRROR overrides it). Fetched once, then reused; every network
# step is bounded by VGPU_REALDRV_FETCH_TIMEOUT (default 300 s). A suite
# whose packages cannot be had is skipped with the reason.
#
# There is no GPU: cuInit answers 100 and nvmlInit_v2 9. Run as root, the
# real libcuda mknods /dev/nvidiactl on cuInit, so every probe runs in a
# private mount namespace with its own /dev (a tmpfs): the machine's /dev is
# never written. Without root or unshare the test is skipped.
#
# The probe (test/realdrv/probe.c, build/realdrv-probe) prints what the
# driver answers: dlsym/dlvsym, cuGetProcAddress(_v2) for every name the CUDA
# 12.4 runtime asks for (test/realdrv/names.txt) and every symbol libvgpu.so
# exports, x versions x flags, cuInit, versions, error names and strings,
# NVML init/shutdown, error strings and device queries before init, whether
# dlclose unloads the libraries, every wrapped CUDA call's return code, and
# the CUDA runtime on top when test/cudart has cached it (build/cudart). It
# runs without and with libvgpu.so preloaded in three settings: outside any
# claim, inside a claim (an injected config naming a GPU, mounted as the
# plugin does) and with an environment limit; with VGPU_REALDRV_SAN_LIB and
# VGPU_REALDRV_SAN_PREFIX (the ASan+UBSan build of libvgpu.so and libasan.so,
# as the Makefile passes them) the claim setting once more with the
# sanitized library. For each setting the two stdouts must be identical, the
# library must write nothing to stdout, and both runs must exit 0 within
# VGPU_REALDRV_RUN_TIMEOUT seconds (default 60). The probes' stderr and any
# diff stay in build/realdrv/<suite>.
set -u

core="$(cd "$(dirname "$0")/../.." && pwd)"
build="$core/build"
top="${VGPU_REALDRV_DIR:-$build/realdrv}"
suites="${VGPU_REALDRV_SUITES:-bookworm trixie}"
fetch_timeout="${VGPU_REALDRV_FETCH_TIMEOUT:-300}"
run_timeout="${VGPU_REALDRV_RUN_TIMEOUT:-60}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
probe="$build/realdrv-probe"
lib="$build/libvgpu.so"
packages=(libcuda1 libnvidia-ml1 libnvidia-ptxjitcompiler1)

# shellcheck source=../lib/skip.sh
. "$core/test/lib/skip.sh"
skip() { skipped realdrv-test "$@"; }
fail() {
    echo "FAIL realdrv-test: $*" >&2
    exit 1
}

# ---- inside the private mount namespace (re-executed by the code below) ----

# Mounts a tmpfs of our own on /dev, with the few character devices a
# process needs bound from the machine's (no mknod needed).
private_dev() {
    local dev="$work/dev" n
    mkdir -p "$dev" && mount -t tmpfs -o mode=0755 vgpu-realdrv-dev "$dev" || return 1
    for n in null zero full random urandom; do
        [ -c "/dev/$n" ] || continue
        : >"$dev/$n" && mount --bind "/dev/$n" "$dev/$n" || return 1
    done
    mkdir -p "$dev/shm" && mount -t tmpfs -o mode=1777 vgpu-realdrv-shm "$dev/shm" || return 1
    ln -s /proc/self/fd "$dev/fd" && ln -s fd/0 "$dev/stdin" && ln -s fd/1 "$dev/stdout" &&
        ln -s fd/2 "$dev/stderr" || return 1
    mount --move "$dev" /dev
}

# probe_once OUT ERR ARGS...: runs the probe (its environment set by the caller).
probe_once() {
    local out="$1" err="$2" rc
    shift 2
    timeout -k 5 "$run_timeout" "$@" >>"$out" 2>>"$err"
    rc=$?
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "hung (killed after ${run_timeout}s): $* (see $err)"
    [ "$rc" -eq 0 ] || { tail -n 5 "$err" >&2; fail "exited $rc: $* (last output: $(tail -n 1 "$out"))"; }
}

# run NAME PRELOAD WRAPPER...: the three probe runs of one setting, stdout in $work/NAME.out.
run() {
    local name="$1" preload="$2" out err
    out="$work/$name.out" err="$keep/$name.err" # stderr kept for a look after the run
    shift 2
    : >"$out"
    : >"$err"
    probe_once "$out" "$err" env ${preload:+LD_PRELOAD="$preload"} "$@" "$probe" "$names" ${cudart:+"$cudart"}
    echo "--- unload" >>"$out"
    probe_once "$out" "$err" env ${preload:+LD_PRELOAD="$preload"} "$@" "$probe" --unload
    echo "--- unload after calls" >>"$out"
    probe_once "$out" "$err" env ${preload:+LD_PRELOAD="$preload"} "$@" "$probe" --unload --calls
    grep -q "libvgpu.so loaded: $([ -n "$preload" ] && echo yes || echo no)" "$err" ||
        fail "$name: libvgpu.so preloaded: ${preload:-no}, but the probe says otherwise (see $err)"
}

# summarize DIFF: the differing lines; dlsym/dlvsym ones (many) only as a count
# per stage, handle and answer with libvgpu.so, with the first
# VGPU_REALDRV_DIFF_LINES (default 4) names; all others in full up to 40.
summarize() {
    grep '^[-+][^-+]' "$1" | awk -v ex="${VGPU_REALDRV_DIFF_LINES:-4}" '
        / dlv?sym\(/ {
            if (substr($0, 1, 1) == "-") next
            name = $0; sub(/^[^,]*, /, "", name); sub(/[,)].*/, "", name)
            k = $0; sub(/^[+]/, "", k); sub(/, [^)]*\)/, ", ...)", k)
            if (!(k in n)) order[++keys] = k
            if (++n[k] <= ex) names[k] = names[k] (n[k] > 1 ? ", " : "") name
            next
        }
        { if (++other <= 40) print "     " $0 }
        END {
            if (other > 40) print "     ... " other - 40 " more"
            for (i = 1; i <= keys; i++)
                print "     " n[order[i]] " x with libvgpu.so: " order[i] " (" names[order[i]] \
                    (n[order[i]] > ex ? ", ..." : "") ")"
        }'
}

in_namespace() {
    local settings setting status=0 claims="$work/claims" region_size preload wrap
    private_dev || fail "cannot mount a private /dev in the mount namespace"
    rm -f "$keep"/*.err "$keep"/*.diff
    export LD_LIBRARY_PATH="$libdir"
    region_size="$("$build/region-writer" --layout | awk '$1 == "VGPU_REGION_SIZE" {print $2}')"
    [ -n "$region_size" ] || fail "cannot read VGPU_REGION_SIZE from $build/region-writer --layout"
    mkdir -p "$claims/realdrv/shm"
    cat >"$claims/realdrv/config" <<CFG
version=1
claim=realdrv
device.count=1
device.0.uuid=GPU-7e1f2a3b-4c5d-6e7f-8091-a2b3c4d5e6f7
device.0.memory_limit_bytes=1073741824
device.0.sm_limit_percent=0
CFG
    truncate -s "$region_size" "$claims/realdrv/shm/region" || fail "cannot create the claim's region"
    chmod 0666 "$claims/realdrv/shm/region"

    settings=(outside claim env)
    # The claim once more under ASan+UBSan (the Makefile passes the sanitized build).
    [ -n "${VGPU_REALDRV_SAN_LIB:-}" ] && [ -n "${VGPU_REALDRV_SAN_PREFIX:-}" ] && settings+=(claim-asan)
    for setting in "${settings[@]}"; do
        preload="$lib"
        case "$setting" in
        outside) wrap=() ;;
        claim) wrap=(VGPU_CLAIMS_ROOT="$claims" LIBCUDA_LOG_LEVEL=debug "$build/claims-ns" "$claims") ;;
        env) wrap=(CUDA_DEVICE_MEMORY_LIMIT=1g LIBCUDA_LOG_LEVEL=debug) ;;
        claim-asan)
            preload="$VGPU_REALDRV_SAN_PREFIX $VGPU_REALDRV_SAN_LIB"
            wrap=(ASAN_OPTIONS=detect_leaks=0 VGPU_CLAIMS_ROOT="$claims" LIBCUDA_LOG_LEVEL=debug
                "$build/claims-ns" "$claims") ;;
        esac
        run "$setting.plain" "" "${wrap[@]}"
        run "$setting.preloaded" "$preload" "${wrap[@]}"
        # The setting took effect (the library's debug line when it initialises;
        # on stdout it is a failure, found below).
        case "$setting" in
        claim*) grep -q "initialised: 1 claim(s), enforced mode" "$keep/$setting.preloaded.err" \
            "$work/$setting.preloaded.out" ||
            fail "$version: the injected claim was not used (see $keep/$setting.preloaded.err)" ;;
        env) grep -q "initialised: 0 claim(s), standalone mode" "$keep/$setting.preloaded.err" \
            "$work/$setting.preloaded.out" ||
            fail "$version: libvgpu.so did not initialise standalone (see $keep/$setting.preloaded.err)" ;;
        esac
        if grep -q '^\[vgpu\]' "$work/$setting.preloaded.out"; then
            echo "FAIL realdrv-test $version, $setting: libvgpu.so wrote to stdout:" >&2
            grep -m 5 '^\[vgpu\]' "$work/$setting.preloaded.out" >&2
            status=1
        fi
        if ! diff -U 0 "$work/$setting.plain.out" "$work/$setting.preloaded.out" >"$work/$setting.diff"; then
            echo "FAIL realdrv-test $version, $setting: $(grep -c '^-[^-]' "$work/$setting.diff") of" \
                "$(wc -l <"$work/$setting.plain.out") lines differ with libvgpu.so preloaded:" >&2
            summarize "$work/$setting.diff" >&2
            cp "$work/$setting.diff" "$keep/$setting.diff" 2>/dev/null &&
                echo "     (whole diff: $keep/$setting.diff)" >&2
            status=1
        else
            echo "ok   realdrv-test $version, $setting: $(wc -l <"$work/$setting.plain.out") lines" \
                "identical with and without libvgpu.so"
        fi
    done
    # The driver's mknod landed in the private /dev, not the machine's.
    [ -e /dev/nvidiactl ] && echo "     (cuInit created /dev/nvidiactl in the private /dev)"
    exit "$status"
}

if [ "${1:-}" = "--in-namespace" ]; then
    work="$2" names="$3" libdir="$4" version="$5" keep="$6" cudart="${7:-}"
    in_namespace
fi

# ---- outside: fetch, then one namespace per driver version -----------------

fetch() { # suite, cache dir
    local suite="$1" cache="$2" apt="$2/apt" opts mirror
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
        { echo "needs apt-get and dpkg-deb (a Debian-based machine)"; return 1; }
    [ -r "$keyring" ] || { echo "needs $keyring to verify Debian's archive"; return 1; }
    mirror="$("$core/test/lib/apt_mirror.sh")" ||
        { echo "no Debian archive in this machine's apt sources (set VGPU_DEBIAN_MIRROR)"; return 1; }
    rm -rf "$apt" "$cache/debs" "$cache/root"
    mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/sources.d" "$cache/debs" \
        "$cache/root" || { echo "cannot create $cache"; return 1; }
    echo "deb [signed-by=$keyring] $mirror $suite non-free" >"$apt/sources.list"
    : >"$apt/status"
    opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/sources.d"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "Dir::State::Status=$apt/status"
        -o "APT::Sandbox::User=root" -o "Acquire::Retries=1")
    echo "fetching ${packages[*]} from $mirror $suite non-free into $cache" >&2
    timeout "$fetch_timeout" apt-get -qq "${opts[@]}" update >"$cache/fetch.log" 2>&1 ||
        { echo "cannot fetch Debian $suite non-free package lists (see $cache/fetch.log)"; return 1; }
    (cd "$cache/debs" && timeout "$fetch_timeout" apt-get -qq "${opts[@]}" download \
        "${packages[@]}") >>"$cache/fetch.log" 2>&1 ||
        { echo "cannot download ${packages[*]} from Debian $suite (see $cache/fetch.log)"; return 1; }
    for deb in "$cache"/debs/*.deb; do
        dpkg-deb -x "$deb" "$cache/root" || { echo "cannot unpack $deb"; return 1; }
    done
}

find_libdir() {
    find "$1/root" -name libcuda.so.1 -printf '%h\n' 2>/dev/null | head -n 1
}

[ -x "$probe" ] && [ -e "$lib" ] && [ -x "$build/claims-ns" ] && [ -x "$build/region-writer" ] ||
    fail "build/realdrv-probe, libvgpu.so, claims-ns or region-writer missing (make -C vgpu-core realdrv-test builds them)"
[ "$(id -u)" -eq 0 ] || unavailable realdrv-test "needs root (a private mount namespace with its own /dev: the real libcuda mknods /dev/nvidiactl)"
command -v unshare >/dev/null || unavailable realdrv-test "needs unshare (util-linux) for a private mount namespace"
unshare -m --propagation private true 2>/dev/null || unavailable realdrv-test "cannot create a private mount namespace (unshare -m)"

# test/cudart/run.sh fetches the runtime under an exclusive lock on this file.
cudart_cache="${VGPU_CUDART_DIR:-$build/cudart}"
cudart=""
if [ -d "$cudart_cache/root" ] && exec 9>"$cudart_cache.lock" && flock -s -w "$fetch_timeout" 9; then
    cudart="$(find "$cudart_cache/root" -name libcudart.so.12 2>/dev/null | head -n 1)"
    exec 9>&-
fi
[ -n "$cudart" ] || echo "note realdrv-test: no cached CUDA runtime (make cudart-test fetches it); runtime on top not probed"

work="$(mktemp -d /tmp/vgpu-realdrv-XXXXXX)"
trap 'rm -rf "$work"' EXIT
# The runtime's names and every entry point libvgpu.so exports.
{
    grep -v '^#' "$core/test/realdrv/names.txt"
    nm -D --defined-only "$lib" | awk '$3 ~ /^(cu|nvml)/ {print $3}'
} | sort -u >"$work/names"

host_ctl=no
[ -e /dev/nvidiactl ] && host_ctl=yes
status=0 tested=0
for suite in $suites; do
    cache="$top/$suite"
    libdir="$(find_libdir "$cache")"
    if [ -z "$libdir" ] || [ ! -e "$libdir/libnvidia-ml.so.1" ]; then
        why="$(fetch "$suite" "$cache")" || {
            echo "SKIP realdrv-test $suite: $why"
            [ -z "${VGPU_TEST_SKIP_LOG:-}" ] || echo "realdrv-test $suite: $why" >>"$VGPU_TEST_SKIP_LOG"
            continue
        }
        libdir="$(find_libdir "$cache")"
    fi
    [ -n "$libdir" ] && [ -e "$libdir/libnvidia-ml.so.1" ] ||
        fail "Debian $suite's packages unpacked without libcuda.so.1/libnvidia-ml.so.1"
    version="$(basename "$(readlink -f "$libdir/libcuda.so.1")")"
    version="driver ${version#libcuda.so.} (Debian $suite)"
    mkdir -p "$work/$suite"
    unshare -m --propagation private "$0" --in-namespace "$work/$suite" "$work/names" "$libdir" "$version" "$cache" "$cudart" ||
        status=1
    tested=$((tested + 1))
done
if [ "$host_ctl" = no ] && [ -e /dev/nvidiactl ]; then
    fail "/dev/nvidiactl appeared in the machine's /dev: the private /dev did not hold"
fi
# Each suite that could not be fetched was counted above.
[ "$tested" -gt 0 ] || { echo "SKIP realdrv-test: no driver version could be fetched (see the lines above)"; exit 0; }
[ "$status" -eq 0 ] || fail "libvgpu.so is not invisible on top of the real driver (differences above;" \
    "CUDA runtime on top: $([ -n "$cudart" ] && basename "$(readlink -f "$cudart")" || echo none))"
echo "ok   realdrv-test: $tested driver version(s), identical with and without libvgpu.so" \
    "(CUDA runtime on top: $([ -n "$cudart" ] && basename "$(readlink -f "$cudart")" || echo none))"
