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

# mkdriverroot.sh DIR - lays out a fake NVIDIA driver root for containers and
# NVIDIA's nvcdi library, using the fake libcuda.so.1 / libnvidia-ml.so.1.
#
#   DIR/usr/lib/x86_64-linux-gnu/lib{cuda,nvidia-ml}.so.<driver version>
#       (+ .so.1 and .so symlinks, as the NVIDIA installer creates them)
#   DIR/dev/nvidia<i>, nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset
#       character devices (nvcdi accepts only character devices). They are
#       created as the null device (1:3) so that nothing can reach real
#       hardware through them; this needs root (CAP_MKNOD). Without it the
#       nodes are skipped with a warning and nvcdi cannot list GPU devices.
#   DIR/dev/nvidia-caps/nvidia-cap<N> for every MIG-capable GPU (a
#       gpu<i>_mig_geometry or mig_geometry other than none): the capability
#       nodes of the MIG instances the fake NVML can create on it, N as in
#       the capability files it writes (fake_nvml_mig.c, cap_minor), also 1:3.
#
# Running it again over DIR keeps the libraries that did not change (their
# inode: processes and containers that use them keep working) and adds the
# nodes a changed configuration needs.
#
# Environment: FAKE_LIB_DIR (default: the build/fake next to this script),
# VGPU_FAKE_CONFIG / VGPU_FAKE_DRIVER_VERSION / VGPU_FAKE_GPU_COUNT as for
# the fakes themselves (file keys win over variables).
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
root=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
libdir=${FAKE_LIB_DIR:-$here/../build/fake}

# Value of KEY from the VGPU_FAKE_CONFIG file, else from VGPU_FAKE_<KEY>, else DEFAULT.
setting() {
    local key=$1 default=$2 env value=""
    env="VGPU_FAKE_${key^^}"
    if [[ -n "${VGPU_FAKE_CONFIG:-}" ]]; then
        value=$(sed -n "s/^[[:space:]]*${key}[[:space:]]*=[[:space:]]*\(.*[^[:space:]]\)[[:space:]]*$/\1/p" \
            "$VGPU_FAKE_CONFIG" | tail -n 1)
    fi
    echo "${value:-${!env:-$default}}"
}

version=$(setting driver_version 580.95.05)
count=$(setting gpu_count 2)
if [[ ! "$version" =~ ^[0-9][0-9.]*$ || ! "$count" =~ ^[0-9]+$ ]]; then
    echo "$0: invalid driver_version '$version' or gpu_count '$count'" >&2
    exit 1
fi
for lib in libcuda.so.1 libnvidia-ml.so.1; do
    if [[ ! -f "$libdir/$lib" ]]; then
        echo "$0: $libdir/$lib not found (run make -C vgpu-core fakes)" >&2
        exit 1
    fi
done

dest=$root/usr/lib/x86_64-linux-gnu
mkdir -p "$dest" "$root/dev"
for name in libcuda libnvidia-ml; do
    cmp -s "$libdir/$name.so.1" "$dest/$name.so.$version" ||
        install -m 0755 "$libdir/$name.so.1" "$dest/$name.so.$version"
    ln -sfn "$name.so.$version" "$dest/$name.so.1"
    ln -sfn "$name.so.1" "$dest/$name.so"
done

nodes=(nvidiactl nvidia-uvm nvidia-uvm-tools nvidia-modeset)
# The fake's capability minors: 1 + (gpu * 8 + gi) * 9 + ci + 1, GPU
# instances 1..7, compute instances 0..7 (ci -1: the GPU instance's own).
max_gi=7 max_ci=8
for ((i = 0; i < count; i++)); do
    nodes+=("nvidia$i")
    geometry=$(setting "gpu${i}_mig_geometry" "$(setting mig_geometry none)")
    [[ "$geometry" == none ]] && continue
    mkdir -p "$root/dev/nvidia-caps"
    for ((gi = 1; gi <= max_gi; gi++)); do
        for ((ci = -1; ci < max_ci; ci++)); do
            nodes+=("nvidia-caps/nvidia-cap$((1 + (i * (max_gi + 1) + gi) * (max_ci + 1) + ci + 1))")
        done
    done
done
for node in "${nodes[@]}"; do
    path=$root/dev/$node
    [[ -c "$path" ]] && continue
    rm -f "$path"
    if ! mknod -m 0666 "$path" c 1 3 2>/dev/null; then
        echo "$0: warning: cannot create character device $path (needs root)" >&2
    fi
done
echo "$root"
