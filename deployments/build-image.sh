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

# build-image.sh: builds the vgpu-dra driver image without a container engine,
# as a `docker save` tar for `ctr -n k8s.io images import` / `docker load`.
#
#   deployments/build-image.sh                   write $OUTPUT (the image tar)
#   deployments/build-image.sh --rootfs-dir DIR  write the image's files into DIR
#                                                 instead (used by the Dockerfile)
#
# Needs the build outputs of `make build`: bin/dra-kubelet-plugin and
# vgpu-core/build/libvgpu.so (bin/dra-controller is added when present). It
# (re)builds bin/vgpu-install (static, the chart's init container) and
# bin/kubectl-vgpu (static, the kubectl plugin) with make, at $VERSION.
#
# Environment:
#   VERSION            image version (default: git describe, else "dev")
#   IMAGE              image reference (default ghcr.io/vgpu-dra/vgpu-dra-driver:$VERSION)
#   OUTPUT             image tar (default _output/images/vgpu-dra-driver.tar)
#   SOURCE_DATE_EPOCH  timestamp of the image and its files (default 0: reproducible)
#   GO                 go command (default go)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
IMAGE=${IMAGE:-ghcr.io/vgpu-dra/vgpu-dra-driver:$VERSION}
OUTPUT=${OUTPUT:-_output/images/vgpu-dra-driver.tar}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0}

target=(--output "$OUTPUT" --tag "$IMAGE")
case "${1:-}" in
  --rootfs-dir)
    [ -n "${2:-}" ] || { echo "build-image.sh: --rootfs-dir needs a directory" >&2; exit 2; }
    target=(--rootfs-dir "$2") ;;
  "") ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac

for f in bin/dra-kubelet-plugin vgpu-core/build/libvgpu.so; do
  [ -f "$f" ] || { echo "build-image.sh: missing $f: run 'make build' first" >&2; exit 1; }
done
controller=()
[ -f bin/dra-controller ] && controller=(--controller bin/dra-controller)

make --no-print-directory GO="$GO" VERSION="$VERSION" bin/vgpu-install bin/kubectl-vgpu
[ "${target[0]}" = --output ] && mkdir -p "$(dirname "$OUTPUT")"
"$GO" run ./deployments/container/imagebuild --plugin bin/dra-kubelet-plugin "${controller[@]}" \
  --installer bin/vgpu-install --kubectl-vgpu bin/kubectl-vgpu --libvgpu vgpu-core/build/libvgpu.so --version "$VERSION" "${target[@]}"
[ "${target[0]}" = --output ] && echo "$IMAGE $OUTPUT"
exit 0
