#!/usr/bin/env bash
# driver.sh: installs the vgpu-dra driver on the local e2e cluster as a host
# process on a simulated GPU node (the Helm chart will replace this), and
# drives the failure scenarios the specs need. See docs/e2e.md.
#
#   driver.sh install      fake driver root + vendor CDI spec, DeviceClass, start the plugin,
#                          wait for its ResourceSlice
#   driver.sh uninstall [--keep-cluster-objects]
#                          stop the plugin, remove its files (and the DeviceClass)
#   driver.sh restart      SIGTERM the plugin and start a new instance
#   driver.sh kill         SIGKILL the plugin (no cleanup), leaving it stopped
#   driver.sh start        start the plugin (after kill) and wait until it serves
#   driver.sh reboot       simulated node reboot: SIGKILL the plugin, wipe the
#                          runtime's CDI directory (tmpfs on a real node), start
#                          the plugin
#   driver.sh status       exit 0 when the plugin runs and its ResourceSlice is published
#
# Needs `make build` (bin/dra-kubelet-plugin, vgpu-core/build) and a running cluster.
set -euo pipefail

# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

DRIVER_NAME=vgpu.dra.dev
E2E_DRIVER_DIR=$E2E_RUN_DIR/driver
# The simulated node's /etc/cdi: where the NVIDIA toolkit would keep the
# vendor spec. Unlike the runtime's CDI directory it survives a reboot.
E2E_VENDOR_CDI_DIR=$E2E_DRIVER_DIR/etc-cdi
E2E_FAKE_GPU_COUNT=${E2E_FAKE_GPU_COUNT:-2}
E2E_FAKE_GPU_MEMORY=${E2E_FAKE_GPU_MEMORY:-80Gi}
E2E_PLUGIN_VERBOSITY=${E2E_PLUGIN_VERBOSITY:-4}
CORE_BUILD=$REPO_ROOT/vgpu-core/build
PLUGIN=$E2E_DRIVER_DIR/bin/dra-kubelet-plugin

_check_built() {
  local f
  for f in "$REPO_ROOT/bin/dra-kubelet-plugin" "$CORE_BUILD/libvgpu.so" \
    "$CORE_BUILD/fake/libcuda.so.1" "$CORE_BUILD/fake/libnvidia-ml.so.1" \
    "$REPO_ROOT/vgpu-core/fake/mkdriverroot.sh"; do
    [ -e "$f" ] || die "missing $f: run 'make build' first"
  done
}

# _lay_out copies everything the plugin and its containers use out of the
# source tree, so a rebuild while the cluster runs changes nothing under it.
_lay_out() {
  rm -rf "$E2E_DRIVER_DIR"
  mkdir -p "$E2E_DRIVER_DIR/bin" "$E2E_DRIVER_DIR/vgpu" "$E2E_DRIVER_DIR/state" \
    "$E2E_DRIVER_DIR/fake-state" "$E2E_KUBELET_DIR/plugins_registry" \
    "$E2E_KUBELET_DIR/plugins/$DRIVER_NAME"
  # Containers of any user write their usage there.
  chmod 0777 "$E2E_DRIVER_DIR/fake-state"
  cp "$REPO_ROOT/bin/dra-kubelet-plugin" "$PLUGIN"
  cp "$CORE_BUILD/libvgpu.so" "$E2E_DRIVER_DIR/vgpu/libvgpu.so"
  cat >"$E2E_DRIVER_DIR/fake-config" <<CFG
gpu_count=$E2E_FAKE_GPU_COUNT
gpu_memory=$E2E_FAKE_GPU_MEMORY
CFG
  _fake_env
  "$REPO_ROOT/vgpu-core/fake/mkdriverroot.sh" "$E2E_DRIVER_DIR/driver-root" >/dev/null
  # go-nvml wraps NVML functions its header marks deprecated; that is not ours to fix.
  (cd "$REPO_ROOT" && CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" nice -n 10 \
    go build -o "$E2E_DRIVER_DIR/bin/fake-gpu-cdi" ./test/e2e/cmd/fake-gpu-cdi)
}

# _fake_lib NAME prints the fake driver root's copy of a driver library.
_fake_lib() {
  local f
  f=$(find "$E2E_DRIVER_DIR/driver-root" -name "$1" \( -type f -o -type l \) | head -n1)
  [ -n "$f" ] || die "the fake driver root has no $1"
  echo "$f"
}

_fake_env() {
  export VGPU_FAKE_CONFIG=$E2E_DRIVER_DIR/fake-config
  export VGPU_FAKE_STATE_DIR=$E2E_DRIVER_DIR/fake-state
}

write_vendor_spec() {
  _fake_env
  mkdir -p "$E2E_VENDOR_CDI_DIR"
  "$E2E_DRIVER_DIR/bin/fake-gpu-cdi" --output-dir "$E2E_VENDOR_CDI_DIR" \
    --nvml-library "$(_fake_lib libnvidia-ml.so.1)" --cuda-library "$(_fake_lib libcuda.so.1)" \
    --fake-config "$VGPU_FAKE_CONFIG" --fake-state-dir "$VGPU_FAKE_STATE_DIR" >/dev/null
}

_slice_published() {
  kc get resourceslices --field-selector "spec.driver=$DRIVER_NAME,spec.nodeName=$E2E_NODE_NAME" \
    -o jsonpath='{range .items[*]}{.spec.devices[*].name}{"\n"}{end}' | grep -q gpu-
}

_healthy() {
  # The plugin's /healthz checks both of its gRPC sockets.
  curl -sf "http://$E2E_PLUGIN_HTTP/healthz"
}

# _registered_since LINE succeeds once the kubelet log, after line LINE, shows
# the kubelet registering the plugin and then connecting to it. Until then
# the kubelet refuses to prepare claims ("driver is not registered") and backs
# off for a minute, so a plugin that merely serves is not enough, and neither
# is the previous instance's ResourceSlice. A bare reconnect of the kubelet's
# old connection to the new socket comes before the re-registration and does
# not count. The messages are the kubelet's own (v1.37).
_registered_since() {
  tail -n +"$(($1 + 1))" "$E2E_LOGS/kubelet.log" | awk -v d="$DRIVER_NAME" '
    /"OperationExecutor.RegisterPlugin started"/ && index($0, d "-reg.sock") { registered = 1; next }
    registered && /"Connection changed"/ && index($0, "driverName=\"" d "\"") && /connected=true/ { ok = 1 }
    END { exit !ok }'
}

cmd_start() {
  _fake_env
  pid_of dra-kubelet-plugin >/dev/null && die "the plugin already runs"
  local mark
  mark=$(wc -l <"$E2E_LOGS/kubelet.log")
  start_bg dra-kubelet-plugin "$PLUGIN" \
    --node-name="$E2E_NODE_NAME" --kubeconfig="$E2E_KUBECONFIG" \
    --state-root="$E2E_DRIVER_DIR/state" --cdi-root="$E2E_CDI_DIR" \
    --kubelet-registrar-directory-path="$E2E_KUBELET_DIR/plugins_registry" \
    --kubelet-plugin-data-directory-path="$E2E_KUBELET_DIR/plugins/$DRIVER_NAME" \
    --libvgpu-path="$E2E_DRIVER_DIR/vgpu/libvgpu.so" \
    --nvml-library="$(_fake_lib libnvidia-ml.so.1)" \
    --gpu-edits=cdi-spec --vendor-cdi-kind=nvidia.com/gpu --vendor-cdi-dirs="$E2E_VENDOR_CDI_DIR" \
    --http-address="$E2E_PLUGIN_HTTP" --v="$E2E_PLUGIN_VERBOSITY"
  wait_started dra-kubelet-plugin "the plugin's /healthz" 60 _healthy
  wait_started dra-kubelet-plugin "the kubelet to register the plugin" 60 _registered_since "$mark"
  wait_started dra-kubelet-plugin "the plugin's ResourceSlice" 60 _slice_published
}

cmd_install() {
  require_root
  "$E2E_ROOT/cluster.sh" status || die "the cluster is not up: run test/e2e/cluster.sh up"
  _check_built
  stop_bg dra-kubelet-plugin
  _lay_out
  write_vendor_spec
  local classes=("$REPO_ROOT"/deviceclasses/*.yaml)
  [ -e "${classes[0]}" ] || die "no DeviceClass manifests in $REPO_ROOT/deviceclasses"
  kc apply -f "$REPO_ROOT/deviceclasses/" >/dev/null
  cmd_start
  log "driver $DRIVER_NAME installed: $(kc get resourceslices --field-selector spec.driver=$DRIVER_NAME -o name | tr '\n' ' ')"
}

cmd_uninstall() {
  local keep=false
  [ "${1:-}" = "--keep-cluster-objects" ] && keep=true
  stop_bg dra-kubelet-plugin
  if ! $keep && "$E2E_ROOT/cluster.sh" status; then
    kc delete -f "$REPO_ROOT/deviceclasses/" --ignore-not-found >/dev/null || true
  fi
  rm -rf "$E2E_DRIVER_DIR"
}

cmd_kill() {
  local pid
  pid=$(pid_of dra-kubelet-plugin) || die "the plugin does not run"
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$E2E_PIDS/dra-kubelet-plugin.pid"
}

cmd_reboot() {
  pid_of dra-kubelet-plugin >/dev/null && cmd_kill
  find "$E2E_CDI_DIR" -mindepth 1 -delete
  cmd_start
}

case "${1:-}" in
  install) cmd_install ;;
  uninstall) shift; cmd_uninstall "$@" ;;
  restart) stop_bg dra-kubelet-plugin; cmd_start ;;
  kill) cmd_kill ;;
  start) cmd_start ;;
  reboot) cmd_reboot ;;
  status) pid_of dra-kubelet-plugin >/dev/null && _slice_published ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
