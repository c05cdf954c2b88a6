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

# driver.sh: installs the vgpu-dra driver on the local e2e cluster on a
# simulated GPU node, and drives the failure scenarios the specs need. See
# docs/e2e.md.
#
# By default the driver is installed the production way, with the Helm chart
# (deployments/helm/vgpu-dra-driver): the kubelet plugin DaemonSet and the
# dra-controller. E2E_DRIVER_MODE=host runs only the kubelet plugin as a host
# process instead (no controller: quicker to debug the plugin).
#
#   driver.sh install      fake driver root + vendor CDI spec; chart: image build
#                          and import, helm install; host: DeviceClasses and the
#                          plugin process; wait for its ResourceSlice
#   driver.sh uninstall [--keep-cluster-objects]
#                          remove the driver (and the DeviceClasses) and its files
#   driver.sh restart      SIGTERM the plugin and wait for a new instance
#   driver.sh kill         SIGKILL the plugin (no cleanup); host: it stays
#                          stopped; chart: the kubelet restarts its container
#   driver.sh start        wait until a new plugin instance serves (host: start it)
#   driver.sh reboot       simulated node reboot: SIGKILL the plugin, wipe the
#                          runtime's CDI directory (tmpfs on a real node), wait
#                          for a new plugin instance
#   driver.sh upgrade TAG  chart: build and import image TAG, helm upgrade to it
#   driver.sh controller N chart: scale the dra-controller to N replicas and wait
#   driver.sh outage SECS  chart: SIGKILL the plugin, keep it from restarting for
#                          SECS seconds (its image withheld from the node), then
#                          wait for the new instance
#   driver.sh gpu-memory SIZE
#                          set the memory of the node's simulated GPUs (e.g.
#                          16Gi) and restart its plugin, which publishes it
#   driver.sh mig on|off   make the node's simulated GPUs H200s in MIG mode
#                          (or plain again) and restart its plugin, which
#                          publishes their MIG devices (docs/mig.md)
#   driver.sh mps on|off   chart: helm upgrade with mps.enabled (docs/mps.md): every
#                          plugin publishes an MPS device beside each GPU and
#                          prepares its claims, the class mps.vgpu.dra.dev exists
#   driver.sh kill-on-mig-create SECS
#                          chart: SIGKILL the plugin as soon as the fake NVML
#                          shows a new MIG GPU instance (within SECS), i.e.
#                          in the middle of a prepare; prints what it hit
#   driver.sh logs [N]     the last N lines of the plugin's log
#   driver.sh status       exit 0 when the plugin runs and its ResourceSlice is published
#
# The commands that act on one node's plugin act on E2E_DRIVER_NODE (default:
# the first node); install and upgrade wait for every node's plugin. With more
# than one node only the chart mode exists (the plugin is a DaemonSet).
#
# Needs `make build` (bin/, vgpu-core/build) and a running cluster.
set -euo pipefail

# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# shellcheck source=lib/nodes.sh
source "$E2E_ROOT/lib/nodes.sh"

DRIVER_NAME=vgpu.dra.dev
# Seen from a node, its own files; seen from this machine, the cluster-wide
# ones (mode, chart values, tools) when the nodes are namespaced.
E2E_DRIVER_DIR=$E2E_RUN_DIR/driver
DRIVER_NODE=${E2E_DRIVER_NODE:-$E2E_NODE_NAME}
node_index "$DRIVER_NODE" >/dev/null || exit 2
# install records the mode, so that later commands and the specs follow it.
E2E_DRIVER_MODE=${E2E_DRIVER_MODE:-$(cat "$E2E_DRIVER_DIR/mode" 2>/dev/null || echo chart)}
case "$E2E_DRIVER_MODE" in chart|host) ;; *) die "E2E_DRIVER_MODE=$E2E_DRIVER_MODE: want chart or host" ;; esac
[ "$E2E_DRIVER_MODE" = host ] && [ "$E2E_NODES" -gt 1 ] && die "E2E_DRIVER_MODE=host runs one node only (E2E_NODES=$E2E_NODES)"
# The simulated node's /etc/cdi: where the NVIDIA toolkit would keep the
# vendor spec. Unlike the runtime's CDI directory it survives a reboot.
E2E_VENDOR_CDI_DIR=$E2E_DRIVER_DIR/etc-cdi
E2E_FAKE_GPU_COUNT=${E2E_FAKE_GPU_COUNT:-2}
E2E_FAKE_GPU_MEMORY=${E2E_FAKE_GPU_MEMORY:-80Gi}
E2E_PLUGIN_VERBOSITY=${E2E_PLUGIN_VERBOSITY:-4}
CORE_BUILD=$REPO_ROOT/vgpu-core/build
PLUGIN=$E2E_DRIVER_DIR/bin/dra-kubelet-plugin
# Built once, outside every node's private paths.
FAKE_GPU_CDI=$E2E_RUN_DIR/tools/fake-gpu-cdi
# The simulated driver's nvidia-cuda-mps-control, static: the plugin runs it
# in its own container (--mps).
FAKE_MPS_CONTROL=$E2E_RUN_DIR/tools/fake-mps-control

CHART=$REPO_ROOT/deployments/helm/vgpu-dra-driver
RELEASE=vgpu-dra
RELEASE_NS=vgpu-dra
E2E_IMAGE_TAG=${E2E_IMAGE_TAG:-e2e1}
# A DeviceClass of the operator's own, listed in the chart's
# extraDeviceClasses; the class-recognition spec creates it with a selector
# spelled differently from the shipped ones.
E2E_EXTRA_DEVICE_CLASS=${E2E_EXTRA_DEVICE_CLASS:-vgpu-e2e-spelled.dra.dev}
PLUGIN_SELECTOR=app.kubernetes.io/instance=$RELEASE,app.kubernetes.io/component=kubelet-plugin
CONTROLLER_SELECTOR=app.kubernetes.io/instance=$RELEASE,app.kubernetes.io/component=controller
# The node's kubelet log, and its line count before a plugin instance went
# away, so that `start` waits for the registration of the next one.
_kubelet_log() { echo "$E2E_LOGS/$(node_comp kubelet "$1").log"; }
_kubelet_mark() { echo "$E2E_LOGS/$(node_comp kubelet "$1").plugin-mark"; }

_check_built() {
  local f
  for f in "$REPO_ROOT/bin/dra-kubelet-plugin" "$CORE_BUILD/libvgpu.so" \
    "$CORE_BUILD/fake/libcuda.so.1" "$CORE_BUILD/fake/libnvidia-ml.so.1" \
    "$REPO_ROOT/vgpu-core/fake/mkdriverroot.sh"; do
    [ -e "$f" ] || die "missing $f: run 'make build' first"
  done
  if [ "$E2E_DRIVER_MODE" = chart ]; then
    [ -e "$REPO_ROOT/bin/dra-controller" ] || die "missing $REPO_ROOT/bin/dra-controller: run 'make build' first"
    [ -x "$E2E_HELM_BIN/helm" ] || die "missing $E2E_HELM_BIN/helm: run test/e2e/cluster.sh build"
  fi
}

# _lay_out writes the files the chart does not: on every node the fake driver
# root, the fake GPU configuration and state, and the vendor CDI spec. Host
# mode also copies the plugin and libvgpu.so out of the source tree, so a
# rebuild while the cluster runs changes nothing under it.
_lay_out() {
  _clear_driver_dir
  mkdir -p "$(dirname "$FAKE_GPU_CDI")"
  # go-nvml wraps NVML functions its header marks deprecated; that is not ours to fix.
  (cd "$REPO_ROOT" && CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" nice -n 10 \
    go build -o "$FAKE_GPU_CDI" ./test/e2e/cmd/fake-gpu-cdi)
  (cd "$REPO_ROOT" && CGO_ENABLED=0 nice -n 10 go build -o "$FAKE_MPS_CONTROL" ./test/e2e/cmd/fake-mps-control)
  local node
  for node in "${E2E_NODE_NAMES[@]}"; do
    node_exec "$node" env E2E_RUN_DIR="$E2E_RUN_DIR" E2E_CACHE_DIR="$E2E_CACHE_DIR" E2E_NODES="$E2E_NODES" \
      E2E_DRIVER_MODE="$E2E_DRIVER_MODE" E2E_DRIVER_NODE="$node" "$E2E_ROOT/driver.sh" _node-files || return 1
  done
}

# _clear_driver_dir empties $E2E_DRIVER_DIR but keeps it: on this machine it
# is where the namespaced nodes' own driver directories are mounted.
_clear_driver_dir() {
  mkdir -p "$E2E_DRIVER_DIR"
  # The shared state root and the claims' region file systems in it.
  unmount_under "$E2E_DRIVER_DIR"
  find "$E2E_DRIVER_DIR" -mindepth 1 -delete
}

# _node_files runs in the node's namespaces: the paths are the node's own.
_node_files() {
  _clear_driver_dir
  mkdir -p "$E2E_DRIVER_DIR/bin" "$E2E_DRIVER_DIR/state" "$E2E_DRIVER_DIR/fake-state" "$E2E_DRIVER_DIR/fake-proc" \
    "$E2E_KUBELET_DIR/plugins_registry" "$E2E_KUBELET_DIR/plugins/$DRIVER_NAME"
  # The plugin mounts each claim's region file system under its state
  # root, which must be a shared mount for the runtime to see them (the
  # chart's Bidirectional volume requires it); systemd makes / shared on a
  # real node, this machine's / is private.
  mount --bind "$E2E_DRIVER_DIR/state" "$E2E_DRIVER_DIR/state"
  mount --make-shared "$E2E_DRIVER_DIR/state"
  # Containers of any user write their usage there.
  chmod 0777 "$E2E_DRIVER_DIR/fake-state"
  if [ "$E2E_DRIVER_MODE" = host ]; then
    mkdir -p "$E2E_DRIVER_DIR/vgpu"
    cp "$REPO_ROOT/bin/dra-kubelet-plugin" "$PLUGIN"
    cp "$CORE_BUILD/libvgpu.so" "$E2E_DRIVER_DIR/vgpu/libvgpu.so"
  fi
  # Each node's GPUs have their own UUIDs. The fake NVML in the plugin
  # writes the capability files of the MIG instances it creates where the
  # plugin's --proc-root reads them (the chart's gpu.procRoot).
  cat >"$E2E_DRIVER_DIR/fake-config" <<CFG
gpu_count=$E2E_FAKE_GPU_COUNT
gpu_memory=$E2E_FAKE_GPU_MEMORY
uuid_seed=$DRIVER_NODE
mig_proc_root=$E2E_DRIVER_DIR/fake-proc
CFG
  _fake_env
  "$REPO_ROOT/vgpu-core/fake/mkdriverroot.sh" "$E2E_DRIVER_DIR/driver-root" >/dev/null
  install -D -m 0755 "$FAKE_MPS_CONTROL" "$E2E_DRIVER_DIR/driver-root/usr/bin/nvidia-cuda-mps-control"
  write_vendor_spec
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
  "$FAKE_GPU_CDI" --output-dir "$E2E_VENDOR_CDI_DIR" \
    --nvml-library "$(_fake_lib libnvidia-ml.so.1)" --cuda-library "$(_fake_lib libcuda.so.1)" \
    --fake-config "$VGPU_FAKE_CONFIG" --fake-state-dir "$VGPU_FAKE_STATE_DIR" \
    --dev-root "$E2E_DRIVER_DIR/driver-root/dev" >/dev/null
}

# _slice_published NODE: the node's plugin published its GPUs.
_slice_published() {
  kc get resourceslices --field-selector "spec.driver=$DRIVER_NAME,spec.nodeName=$1" \
    -o jsonpath='{range .items[*]}{.spec.devices[*].name}{"\n"}{end}' | grep -q gpu-
}

_no_slice() {
  ! kc get resourceslices --field-selector "spec.driver=$DRIVER_NAME" -o name | grep -q .
}

_healthy() {
  # The plugin's /healthz checks both of its gRPC sockets.
  curl -sf "http://$E2E_PLUGIN_HTTP/healthz"
}

# _registered_since NODE LINE succeeds once NODE's kubelet log, after line LINE, shows
# the kubelet registering the plugin and then connecting to it. Until then
# the kubelet refuses to prepare claims ("driver is not registered") and backs
# off for a minute, so a plugin that merely serves is not enough, and neither
# is the previous instance's ResourceSlice. A bare reconnect of the kubelet's
# old connection to the new socket comes before the re-registration and does
# not count. The messages are the kubelet's own (v1.37); the chart's plugin
# names its registration socket after its pod UID.
_registered_since() {
  tail -n +"$(($2 + 1))" "$(_kubelet_log "$1")" | awk -v d="$DRIVER_NAME" '
    /"OperationExecutor.RegisterPlugin started"/ && index($0, d) && /-reg\.sock/ { registered = 1; next }
    registered && /"Connection changed"/ && index($0, "driverName=\"" d "\"") && /connected=true/ { ok = 1 }
    END { exit !ok }'
}

_mark_kubelet_log() { wc -l <"$(_kubelet_log "$1")" >"$(_kubelet_mark "$1")"; }
_kubelet_log_mark() { cat "$(_kubelet_mark "$1")" 2>/dev/null || echo 0; }

# --- host mode: the plugin as a host process ---

host_start() {
  _fake_env
  pid_of dra-kubelet-plugin >/dev/null && die "the plugin already runs"
  _mark_kubelet_log "$E2E_NODE_NAME"
  start_bg dra-kubelet-plugin "$PLUGIN" \
    --node-name="$E2E_NODE_NAME" --kubeconfig="$E2E_KUBECONFIG" \
    --state-root="$E2E_DRIVER_DIR/state" --cdi-root="$E2E_CDI_DIR" \
    --kubelet-registrar-directory-path="$E2E_KUBELET_DIR/plugins_registry" \
    --kubelet-plugin-data-directory-path="$E2E_KUBELET_DIR/plugins/$DRIVER_NAME" \
    --libvgpu-path="$E2E_DRIVER_DIR/vgpu/libvgpu.so" --proc-root="$E2E_DRIVER_DIR/fake-proc" \
    --nvml-library="$(_fake_lib libnvidia-ml.so.1)" \
    --gpu-edits=cdi-spec --vendor-cdi-kind=nvidia.com/gpu --vendor-cdi-dirs="$E2E_VENDOR_CDI_DIR" \
    --http-address="$E2E_PLUGIN_HTTP" --v="$E2E_PLUGIN_VERBOSITY"
  wait_started dra-kubelet-plugin "the plugin's /healthz" 60 _healthy
  wait_started dra-kubelet-plugin "the kubelet to register the plugin" 60 \
    _registered_since "$E2E_NODE_NAME" "$(_kubelet_log_mark "$E2E_NODE_NAME")"
  wait_started dra-kubelet-plugin "the plugin's ResourceSlice" 60 _slice_published "$E2E_NODE_NAME"
}

host_install() {
  local classes=("$REPO_ROOT"/deviceclasses/*.yaml)
  [ -e "${classes[0]}" ] || die "no DeviceClass manifests in $REPO_ROOT/deviceclasses"
  kc apply -f "$REPO_ROOT/deviceclasses/" >/dev/null
  host_start
}

host_uninstall() {
  stop_bg dra-kubelet-plugin
  if [ "$1" = false ] && "$E2E_ROOT/cluster.sh" status; then
    kc delete -f "$REPO_ROOT/deviceclasses/" --ignore-not-found >/dev/null || true
  fi
}

host_kill() {
  local pid
  pid=$(pid_of dra-kubelet-plugin) || die "the plugin does not run"
  _mark_kubelet_log "$E2E_NODE_NAME"
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$E2E_PIDS/dra-kubelet-plugin.pid"
}

# --- chart mode: the Helm chart's DaemonSet and controller ---

helm_() { "$E2E_HELM_BIN/helm" --kubeconfig "$E2E_KUBECONFIG" "$@"; }

# build_image TAG builds the driver image from bin/ and vgpu-core/build and
# imports it into every node's containerd.
build_image() {
  local tag=$1 tar=$E2E_RUN_DIR/images/driver-$1.tar
  mkdir -p "$(dirname "$tar")"
  local out=$E2E_LOGS/driver-image.log
  if ! { (cd "$REPO_ROOT" && VERSION=$tag OUTPUT=$tar nice -n 10 deployments/build-image.sh) &&
    _import_everywhere "$tar"; } >>"$out" 2>&1; then
    tail -n 20 "$out" >&2
    return 1
  fi
  rm -f "$tar"
}

# _values writes the chart's example values for a simulated node with this
# run's paths.
_values() {
  sed "s#/var/lib/vgpu-dra-e2e#$E2E_RUN_DIR#g" "$REPO_ROOT/deployments/helm/examples/simulated-node.yaml" \
    >"$E2E_DRIVER_DIR/values.yaml"
  echo "$E2E_DRIVER_DIR/values.yaml"
}

_import_everywhere() {
  local node
  for node in "${E2E_NODE_NAMES[@]}"; do ctr_node "$node" images import "$1" || return 1; done
}

# plugin_pod NODE prints the name of NODE's plugin pod that is not being deleted.
plugin_pod() {
  kc get pods -n "$RELEASE_NS" -l "$PLUGIN_SELECTOR" --field-selector "spec.nodeName=$1" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' |
    awk 'NF == 1 { print $1; exit }'
}

# _plugin_container_id NODE prints the containerd ID of NODE's running plugin container.
_plugin_container_id() {
  local pod
  pod=$(plugin_pod "$1")
  [ -n "$pod" ] || return 1
  kc get pod -n "$RELEASE_NS" "$pod" \
    -o jsonpath='{range .status.containerStatuses[?(@.name=="plugin")]}{.containerID}{end}' | sed 's#^.*://##'
}

_plugin_ready() {
  local pod
  pod=$(plugin_pod "$1")
  [ -n "$pod" ] && [ "$(kc get pod -n "$RELEASE_NS" "$pod" -o jsonpath='{.status.containerStatuses[?(@.name=="plugin")].ready}')" = true ]
}

_controller_ready() {
  local want=$1 ready
  ready=$(kc get deploy -n "$RELEASE_NS" -l "$CONTROLLER_SELECTOR" -o jsonpath='{.items[0].status.readyReplicas}')
  [ "${ready:-0}" -eq "$want" ] &&
    [ "$(kc get pods -n "$RELEASE_NS" -l "$CONTROLLER_SELECTOR" -o name | wc -l)" -eq "$want" ]
}

# chart_wait_plugin NODE waits for a serving plugin instance on NODE that its
# kubelet registered after the mark.
chart_wait_plugin() {
  local node=$1
  wait_for "the plugin pod on $node Ready" 120 _plugin_ready "$node" || { chart_logs "$node" 40 >&2; return 1; }
  wait_for "the kubelet of $node to register the plugin" 60 _registered_since "$node" "$(_kubelet_log_mark "$node")" ||
    { chart_logs "$node" 40 >&2; return 1; }
  wait_for "the plugin's ResourceSlice of $node" 60 _slice_published "$node" || { chart_logs "$node" 40 >&2; return 1; }
}

chart_wait_plugins() {
  local node
  for node in "${E2E_NODE_NAMES[@]}"; do chart_wait_plugin "$node" || return 1; done
}

_mark_kubelet_logs() {
  local node
  for node in "${E2E_NODE_NAMES[@]}"; do _mark_kubelet_log "$node"; done
}

# chart_logs NODE [N]
chart_logs() {
  local pod
  pod=$(plugin_pod "$1")
  [ -n "$pod" ] && kc logs -n "$RELEASE_NS" "$pod" -c plugin --tail="${2:-60}" 2>&1
}

chart_install() {
  build_image "$E2E_IMAGE_TAG"
  _mark_kubelet_logs
  local values
  values=$(_values)
  helm_ install "$RELEASE" "$CHART" -n "$RELEASE_NS" --create-namespace -f "$values" \
    --set image.tag="$E2E_IMAGE_TAG" --set apiServer.host="$E2E_API_HOST" --set apiServer.port=6443 \
    --set "gpu.vendorCDIDirs={$E2E_VENDOR_CDI_DIR}" \
    --set "controller.webhook.extraDeviceClasses={$E2E_EXTRA_DEVICE_CLASS}" \
    --wait --timeout 3m >>"$E2E_LOGS/helm.log" 2>&1 || {
    tail -n 20 "$E2E_LOGS/helm.log" >&2
    kc get pods -n "$RELEASE_NS" -o wide >&2 || true
    kc describe pods -n "$RELEASE_NS" 2>&1 | tail -n 60 >&2 || true
    return 1
  }
  chart_wait_plugins
  wait_for "the dra-controller Ready" 120 _controller_ready 1
}

chart_uninstall() {
  kc get ns "$RELEASE_NS" >/dev/null 2>&1 || return 0
  # Claims must be unprepared while the plugin still runs.
  local ns
  for ns in $(kc get resourceclaims -A -o jsonpath='{range .items[*]}{.metadata.namespace}{"\n"}{end}' | sort -u); do
    kc delete pods -n "$ns" --all --wait=true --timeout=60s >/dev/null || true
  done
  helm_ uninstall "$RELEASE" -n "$RELEASE_NS" --wait --timeout 2m >>"$E2E_LOGS/helm.log" 2>&1 ||
    tail -n 20 "$E2E_LOGS/helm.log" >&2
  wait_for "the driver's ResourceSlices removed" 60 _no_slice || true
  kc delete ns "$RELEASE_NS" --wait=true --timeout=60s >/dev/null || true
}

_task_gone() { ! ctr_node "$1" tasks ls | awk -v id="$2" '$1 == id && $3 == "RUNNING" { found = 1 } END { exit !found }'; }

# chart_kill SIGKILLs the plugin container's process on $DRIVER_NODE through
# containerd, as a crash would; the kubelet restarts the container.
chart_kill() {
  local id
  id=$(_plugin_container_id "$DRIVER_NODE") || die "no plugin pod on $DRIVER_NODE"
  [ -n "$id" ] || die "the plugin container on $DRIVER_NODE does not run"
  _mark_kubelet_log "$DRIVER_NODE"
  ctr_node "$DRIVER_NODE" tasks kill --signal SIGKILL "$id" >/dev/null
  wait_for "the killed plugin container to exit" 30 _task_gone "$DRIVER_NODE" "$id"
}

# chart_kill_on_mig_create SECS: SIGKILLs the plugin process on $DRIVER_NODE
# the moment a new MIG GPU instance appears on the node: the fake NVML
# writes the instance's capability file right after creating it, before the
# plugin creates its compute instance and writes the claim's files and CDI
# spec. The pid is looked up first and polled for without forking, so that
# the kill lands within milliseconds. Prints whether the compute instance
# existed by then.
chart_kill_on_mig_create() {
  local secs=$1 id pid caps before now deadline g
  id=$(_plugin_container_id "$DRIVER_NODE") || die "no plugin pod on $DRIVER_NODE"
  [ -n "$id" ] || die "the plugin container on $DRIVER_NODE does not run"
  pid=$(ctr_node "$DRIVER_NODE" tasks ls | awk -v id="$id" '$1 == id { print $2 }')
  [ -n "$pid" ] || die "no task of the plugin container $id"
  caps=$(node_path "$DRIVER_NODE" "$E2E_DRIVER_DIR/fake-proc")/driver/nvidia/capabilities
  shopt -s nullglob
  before=("$caps"/gpu*/mig/gi*/access)
  _mark_kubelet_log "$DRIVER_NODE"
  echo "waiting for a new MIG GPU instance (${#before[@]} now)"
  deadline=$((SECONDS + secs))
  while :; do
    now=("$caps"/gpu*/mig/gi*/access)
    [ "${#now[@]}" -gt "${#before[@]}" ] && break
    [ "$SECONDS" -lt "$deadline" ] || die "no new MIG GPU instance on $DRIVER_NODE within ${secs}s"
    sleep 0.002
  done
  kill -9 "$pid"
  for g in "${now[@]}"; do
    [[ " ${before[*]} " == *" $g "* ]] && continue
    g=${g%/access}
    if [ -e "$g/ci0/access" ]; then echo "killed after ${g#"$caps"/} and its compute instance were created"
    else echo "killed after ${g#"$caps"/} was created, before its compute instance"; fi
  done
  wait_for "the killed plugin container to exit" 30 _task_gone "$DRIVER_NODE" "$id"
}

# chart_outage SECS: the plugin on $DRIVER_NODE is SIGKILLed and cannot come
# back for SECS seconds: its image is withheld from the node's containerd (the
# pull policy is Never), so every restart the kubelet tries fails. Then the
# image returns and the next restart, after the kubelet's back-off, is waited
# for, as on any node.
chart_outage() {
  local secs=$1 pod image held
  pod=$(plugin_pod "$DRIVER_NODE")
  [ -n "$pod" ] || die "no plugin pod on $DRIVER_NODE"
  image=$(kc get pod -n "$RELEASE_NS" "$pod" -o jsonpath='{.spec.containers[?(@.name=="plugin")].image}')
  held=$image-outage
  ctr_node "$DRIVER_NODE" images tag --force "$image" "$held" >/dev/null
  ctr_node "$DRIVER_NODE" images rm "$image" >/dev/null
  chart_kill
  log "plugin on $DRIVER_NODE down for ${secs}s"
  sleep "$secs"
  ctr_node "$DRIVER_NODE" images tag --force "$held" "$image" >/dev/null
  ctr_node "$DRIVER_NODE" images rm "$held" >/dev/null
  log "plugin image back on $DRIVER_NODE"
  chart_wait_plugin "$DRIVER_NODE"
  log "plugin on $DRIVER_NODE back"
}

chart_upgrade() {
  local tag=$1
  [ -n "$tag" ] || die "upgrade needs an image tag"
  build_image "$tag"
  _mark_kubelet_logs
  helm_ upgrade "$RELEASE" "$CHART" -n "$RELEASE_NS" --reset-then-reuse-values \
    --set image.tag="$tag" --wait --timeout 3m >>"$E2E_LOGS/helm.log" 2>&1 || {
    tail -n 20 "$E2E_LOGS/helm.log" >&2
    return 1
  }
  chart_wait_plugins
  wait_for "the dra-controller Ready" 120 _controller_ready 1
}

chart_controller() {
  local n=$1
  kc scale deploy -n "$RELEASE_NS" -l "$CONTROLLER_SELECTOR" --replicas="$n" >/dev/null
  wait_for "$n dra-controller replicas Ready" 120 _controller_ready "$n"
}

# --- commands ---

cmd_install() {
  require_root
  "$E2E_ROOT/cluster.sh" status || die "the cluster is not up: run test/e2e/cluster.sh up"
  _check_built
  cmd_uninstall --keep-cluster-objects
  _lay_out
  echo "$E2E_DRIVER_MODE" >"$E2E_DRIVER_DIR/mode"
  "${E2E_DRIVER_MODE}_install"
  log "driver $DRIVER_NAME installed ($E2E_DRIVER_MODE): $(kc get resourceslices --field-selector spec.driver=$DRIVER_NAME -o name | tr '\n' ' ')"
}

cmd_uninstall() {
  local keep=false
  [ "${1:-}" = "--keep-cluster-objects" ] && keep=true
  if [ "$E2E_DRIVER_MODE" = chart ]; then
    "$E2E_ROOT/cluster.sh" status && chart_uninstall
  else
    host_uninstall "$keep"
  fi
  _clear_driver_dir
}

cmd_start() {
  if [ "$E2E_DRIVER_MODE" = chart ]; then chart_wait_plugin "$DRIVER_NODE"; else host_start; fi
}

cmd_kill() { "${E2E_DRIVER_MODE}_kill"; }

cmd_restart() {
  if [ "$E2E_DRIVER_MODE" = chart ]; then
    _mark_kubelet_log "$DRIVER_NODE"
    kc delete pod -n "$RELEASE_NS" "$(plugin_pod "$DRIVER_NODE")" --wait=true >/dev/null
    chart_wait_plugin "$DRIVER_NODE"
  else
    stop_bg dra-kubelet-plugin
    host_start
  fi
}

cmd_reboot() {
  # The runtime's CDI directory goes first: the kubelet restarts a killed
  # plugin container at once, and the new instance must find it empty.
  find "$(node_path "$DRIVER_NODE" "$E2E_CDI_DIR")" -mindepth 1 -delete
  if [ "$E2E_DRIVER_MODE" = chart ]; then
    chart_kill
  else
    pid_of dra-kubelet-plugin >/dev/null && host_kill
  fi
  cmd_start
}

# cmd_gpu_memory SIZE sets gpu_memory in $DRIVER_NODE's fake configuration
# and restarts its plugin, so that it publishes the new size. The file is
# rewritten in place: the plugin's hostPath mount and the containers' CDI
# mounts are of its inode. Containers started before keep what their
# processes read; the burst spec changes the size only while no pod of its
# own runs on the node.
cmd_gpu_memory() {
  local size=$1 f tmp
  [[ $size =~ ^[0-9]+([KMGT]i?)?$ ]] || die "gpu-memory: bad size '$size' (e.g. 16Gi)"
  f=$(node_path "$DRIVER_NODE" "$E2E_DRIVER_DIR/fake-config")
  [ -f "$f" ] || die "no fake configuration $f: run driver.sh install"
  if grep -qx "gpu_memory=$size" "$f"; then
    log "the simulated GPUs of $DRIVER_NODE already have $size"
    return 0
  fi
  tmp=$(mktemp)
  sed "s/^gpu_memory=.*/gpu_memory=$size/" "$f" >"$tmp"
  cat "$tmp" >"$f"
  rm -f "$tmp"
  cmd_restart
  log "the simulated GPUs of $DRIVER_NODE have $size"
}

# MIG_BEGIN and MIG_END enclose what `driver.sh mig on` appends to a node's
# fake configuration (later keys win); `mig off` removes it.
MIG_BEGIN="# driver.sh mig on: begin"
MIG_END="# driver.sh mig on: end"

# cmd_mig on|off turns $DRIVER_NODE's simulated GPUs into H200s in MIG mode,
# or back, the way an admin switches a drained node (docs/mig.md): the mode
# changes while no claim uses the GPUs, then the node's plugin restarts and
# re-discovers them. The fake driver root gains the GPUs'
# /dev/nvidia-caps nodes. The configuration is rewritten in place (its
# inode is mounted, see cmd_gpu_memory).
cmd_mig() {
  local want=$1 f tmp i
  case "$want" in on|off) ;; *) die "mig: want on or off, not '$want'" ;; esac
  f=$(node_path "$DRIVER_NODE" "$E2E_DRIVER_DIR/fake-config")
  [ -f "$f" ] || die "no fake configuration $f: run driver.sh install"
  if { [ "$want" = on ] && grep -qxF "$MIG_BEGIN" "$f"; } || { [ "$want" = off ] && ! grep -qxF "$MIG_BEGIN" "$f"; }; then
    log "MIG already $want on $DRIVER_NODE"
    return 0
  fi
  tmp=$(mktemp)
  awk -v b="$MIG_BEGIN" -v e="$MIG_END" '$0 == b { skip = 1 } !skip { print } $0 == e { skip = 0 }' "$f" >"$tmp"
  if [ "$want" = on ]; then
    {
      echo "$MIG_BEGIN"
      echo "gpu_product=NVIDIA H200 141GB HBM3e"
      echo "gpu_memory=141Gi"
      for ((i = 0; i < E2E_FAKE_GPU_COUNT; i++)); do
        echo "gpu${i}_mig_geometry=h200-141gb"
        echo "gpu${i}_mig_mode=enabled"
      done
      echo "$MIG_END"
    } >>"$tmp"
  fi
  cat "$tmp" >"$f"
  rm -f "$tmp"
  node_exec "$DRIVER_NODE" env VGPU_FAKE_CONFIG="$E2E_DRIVER_DIR/fake-config" \
    "$REPO_ROOT/vgpu-core/fake/mkdriverroot.sh" "$E2E_DRIVER_DIR/driver-root" >/dev/null
  cmd_restart
  log "MIG $want on $DRIVER_NODE"
}

# chart_mps on|off sets the chart's mps.enabled and waits for every plugin
# to publish again (with or without the MPS devices).
chart_mps() {
  local want=$1 enabled
  case "$want" in on) enabled=true ;; off) enabled=false ;; *) die "mps: want on or off, not '$want'" ;; esac
  _mark_kubelet_logs
  helm_ upgrade "$RELEASE" "$CHART" -n "$RELEASE_NS" --reset-then-reuse-values \
    --set mps.enabled="$enabled" --wait --timeout 3m >>"$E2E_LOGS/helm.log" 2>&1 || {
    tail -n 20 "$E2E_LOGS/helm.log" >&2
    return 1
  }
  chart_wait_plugins
  wait_for "the dra-controller Ready" 120 _controller_ready 1
  log "MPS $want"
}

_chart_only() { [ "$E2E_DRIVER_MODE" = chart ] || die "$1 needs E2E_DRIVER_MODE=chart"; }

case "${1:-}" in
  install) cmd_install ;;
  uninstall) shift; cmd_uninstall "$@" ;;
  restart) cmd_restart ;;
  kill) cmd_kill ;;
  start) cmd_start ;;
  reboot) cmd_reboot ;;
  upgrade) _chart_only upgrade; chart_upgrade "${2:-}" ;;
  controller) _chart_only controller; chart_controller "${2:?controller needs a replica count}" ;;
  gpu-memory) cmd_gpu_memory "${2:?gpu-memory needs a size, e.g. 16Gi}" ;;
  mig) cmd_mig "${2:?mig needs on or off}" ;;
  mps) _chart_only mps; chart_mps "${2:?mps needs on or off}" ;;
  kill-on-mig-create) _chart_only kill-on-mig-create; chart_kill_on_mig_create "${2:-60}" ;;
  outage) _chart_only outage; chart_outage "${2:?outage needs a duration in seconds}" ;;
  logs)
    if [ "$E2E_DRIVER_MODE" = chart ]; then chart_logs "$DRIVER_NODE" "${2:-60}"; else tail -n "${2:-60}" "$E2E_LOGS/dra-kubelet-plugin.log"; fi ;;
  status)
    if [ "$E2E_DRIVER_MODE" = chart ]; then _plugin_ready "$DRIVER_NODE" && _slice_published "$DRIVER_NODE"
    else pid_of dra-kubelet-plugin >/dev/null && _slice_published "$E2E_NODE_NAME"; fi ;;
  _node-files) _node_files ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
