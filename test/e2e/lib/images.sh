# shellcheck shell=bash
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

# Container images built from files on this machine, without a registry or a
# docker engine: each image is a one-layer `docker save` tar that
# `ctr images import` understands.

# BusyBox applets the specs and the demo call inside containers.
_BUSYBOX_APPLETS=(sh cat ls env sleep echo test grep id touch head tail wc sort stat mount sed awk cut tr printf kill ps
  cp chmod dd fallocate date)

# _mkimage REF ROOTFS OUT ENTRYPOINT...
_mkimage() {
  local ref=$1 rootfs=$2 out=$3; shift 3
  local work entrypoint="" a diff
  work=$(mktemp -d)
  for a in "$@"; do entrypoint="$entrypoint${entrypoint:+,}\"$a\""; done
  tar --numeric-owner --owner=0 --group=0 --sort=name -C "$rootfs" -cf "$work/layer.tar" .
  diff=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  cat >"$work/config.json" <<JSON
{"architecture":"amd64","os":"linux",
 "config":{"Env":["PATH=/usr/local/bin:/usr/bin:/bin"],"Entrypoint":[$entrypoint],"WorkingDir":"/"},
 "rootfs":{"type":"layers","diff_ids":["sha256:$diff"]}}
JSON
  printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]\n' "$ref" >"$work/manifest.json"
  tar -C "$work" -cf "$out" manifest.json config.json layer.tar
  rm -rf "$work"
}

_busybox_rootfs() {
  local root=$1 a
  mkdir -p "$root/bin" "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for a in "${_BUSYBOX_APPLETS[@]}"; do ln -sf busybox "$root/bin/$a"; done
  printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
}

# _copy_shared_libs ROOT BINARY...: copies the host's glibc files the binaries
# (and the libraries CDI mounts next to them) load, at their host paths, so the
# dynamic loader finds them in its default search path.
_copy_shared_libs() {
  local root=$1; shift
  local lib
  ldd "$@" 2>/dev/null | awk '/=> \// {print $3} /^[[:space:]]*\/[^ ]+ \(/ {print $1}' | sort -u |
    while read -r lib; do
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done
}

# build_images builds the sandbox, busybox and workload images into
# $E2E_RUN_DIR/images. The workload image holds cuda-probe and the C library
# it and libvgpu.so need; the fake driver libraries and libvgpu.so itself come
# from CDI at container start, as the real ones would.
build_images() {
  local out=$E2E_RUN_DIR/images core=$REPO_ROOT/vgpu-core/build
  local probe=$core/cuda-probe
  [ -x "$probe" ] || die "missing $probe: run 'make -C vgpu-core' first"
  rm -rf "$out"
  mkdir -p "$out/pause" "$out/busybox" "$out/workload/usr/local/bin"

  cp "$E2E_PAUSE" "$out/pause/pause"
  _mkimage "$E2E_PAUSE_IMAGE" "$out/pause" "$out/pause.tar" /pause

  _busybox_rootfs "$out/busybox"
  _mkimage "$E2E_BUSYBOX_IMAGE" "$out/busybox" "$out/busybox.tar" /bin/sh

  _busybox_rootfs "$out/workload"
  cp "$probe" "$out/workload/usr/local/bin/cuda-probe"
  _copy_shared_libs "$out/workload" "$probe" "$core/libvgpu.so" \
    "$core/fake/libcuda.so.1" "$core/fake/libnvidia-ml.so.1"
  _mkimage "$E2E_WORKLOAD_IMAGE" "$out/workload" "$out/workload.tar" /usr/local/bin/cuda-probe
  rm -rf "$out/pause" "$out/busybox" "$out/workload"
}

# import_images NODE imports the images into NODE's containerd.
import_images() {
  local node=$1 t out
  for t in pause busybox workload; do
    # ctr warns about cgroup v1 on every call; show its output only on failure.
    out=$(ctr_node "$node" images import "$E2E_RUN_DIR/images/$t.tar" 2>&1) ||
      die "importing the $t image into the containerd of node $node failed: $out"
  done
}
