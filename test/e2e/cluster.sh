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

# cluster.sh: a local Kubernetes cluster on this machine for the e2e specs and
# the demo: etcd, kube-apiserver, kube-controller-manager, kube-scheduler as
# host processes; per node a containerd and a kubelet, DRA and CDI on, images
# imported from local files. One node (E2E_NODES=1, the default) runs on this
# machine itself; with E2E_NODES=2 each node runs in its own mount, network
# and UTS namespaces (lib/nodes.sh). Needs root. See docs/e2e.md.
#
#   cluster.sh build           install packages, build (or reuse) the binaries
#   cluster.sh up [--fresh]    build, then start, then check that the API server and
#                              every kubelet report the versions asked for; reuses a
#                              healthy running cluster of those versions unless
#                              --fresh; a half-started one is torn down first
#   cluster.sh down            stop everything it started, unmount, remove its
#                              state, namespaces and links
#   cluster.sh status          exit 0 when the cluster is up and every node Ready
#   cluster.sh env             print the variables the specs and kubectl need
#   cluster.sh logs [N]        print the last N lines (default 60) of every component log
#   cluster.sh exec NODE CMD.. run CMD in NODE's namespaces (see its mounts,
#                              its processes' view, its network)
#   cluster.sh leftovers       list what a stopped cluster left behind (processes,
#                              namespaces, links, mounts, state); exit 1 if anything
set -euo pipefail

# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/build.sh
source "$E2E_ROOT/lib/build.sh"
# shellcheck source=lib/images.sh
source "$E2E_ROOT/lib/images.sh"
# shellcheck source=lib/pki.sh
source "$E2E_ROOT/lib/pki.sh"
# shellcheck source=lib/node.sh
source "$E2E_ROOT/lib/node.sh"
# shellcheck source=lib/nodes.sh
source "$E2E_ROOT/lib/nodes.sh"

cmd_status() {
  local c node
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do pid_of "$c" >/dev/null || return 1; done
  [ "$(cat "$E2E_RUN_DIR/node-count" 2>/dev/null)" = "$E2E_NODES" ] || return 1
  for node in "${E2E_NODE_NAMES[@]}"; do
    pid_of "$(node_comp containerd "$node")" >/dev/null && pid_of "$(node_comp kubelet "$node")" >/dev/null || return 1
    kc wait --for=condition=Ready "node/$node" --timeout=5s >/dev/null 2>&1 || return 1
  done
}

# _leftovers succeeds when an earlier run left processes, mounts or state.
_leftovers() {
  [ -d "$E2E_RUN_DIR" ] && return 0
  nodes_leftovers && return 0
  awk -v d="$E2E_RUN_DIR/" 'index($2, d) == 1 {found=1} END {exit !found}' /proc/self/mounts
}

cmd_down() {
  require_root
  # Stop the nodes the cluster was started with, whatever E2E_NODES says now.
  [ -f "$E2E_RUN_DIR/node-count" ] && nodes_init "$(cat "$E2E_RUN_DIR/node-count")"
  log "stopping the cluster in $E2E_RUN_DIR"
  # The driver runs on top of the cluster; stop it first if it is installed.
  if [ -x "$E2E_ROOT/driver.sh" ]; then "$E2E_ROOT/driver.sh" uninstall --keep-cluster-objects || true; fi
  stop_cluster
  # Keep the last run's component logs for a post-mortem; the state goes.
  if [ -d "$E2E_LOGS" ]; then
    rm -rf "$E2E_CACHE_DIR/last-run-logs"
    cp -r "$E2E_LOGS" "$E2E_CACHE_DIR/last-run-logs"
  fi
  rm -rf "$E2E_RUN_DIR"
  log "cluster stopped"
}

cmd_up() {
  require_root
  local fresh=false
  [ "${1:-}" = "--fresh" ] && fresh=true
  say_versions
  if ! $fresh && cmd_status; then
    if cluster_versions; then
      log "reusing the running cluster (node $E2E_NODE_NAME Ready)"
      return 0
    fi
    log "the running cluster runs other versions; starting a fresh one"
  fi
  if _leftovers; then
    log "cleaning up an earlier cluster first"
    cmd_down
  fi
  local t0=$SECONDS ip
  build_all
  log "binaries ready after $((SECONDS - t0))s"
  ip=$(node_ip)
  mkdir -p "$E2E_RUN_DIR"
  echo "$E2E_NODES" >"$E2E_RUN_DIR/node-count"
  build_images
  make_pki "$ip"
  write_configs
  # A failed or interrupted start must not leave half a cluster behind.
  trap 'log "interrupted"; cmd_down; exit 130' INT TERM
  if ! start_cluster "$ip"; then
    log "cluster start failed; component logs follow"
    cmd_logs 30
    cmd_down
    exit 1
  fi
  if ! cluster_versions; then
    log "the cluster does not run the versions asked for; stopping it"
    cmd_down
    exit 1
  fi
  trap - INT TERM
  cmd_env >"$E2E_RUN_DIR/env"
  log "cluster up after $((SECONDS - t0))s: nodes ${E2E_NODE_NAMES[*]}; source $E2E_RUN_DIR/env to use it"
}

# cmd_env prints the variables; the paths are this machine's, so for a
# namespaced node they point into its view ($E2E_RUN_DIR/nodes/NODE).
cmd_env() {
  cat <<ENV
export KUBECONFIG=$E2E_KUBECONFIG
export E2E_RUN_DIR=$E2E_RUN_DIR
export E2E_CACHE_DIR=$E2E_CACHE_DIR
export E2E_NODES=$E2E_NODES
export E2E_NODE_LIST="${E2E_NODE_NAMES[*]}"
export E2E_NODE_NAME=$E2E_NODE_NAME
export E2E_NODE_VIEW=$(node_view "$E2E_NODE_NAME")
export E2E_CDI_DIR=$(node_path "$E2E_NODE_NAME" "$E2E_CDI_DIR")
export E2E_PLUGIN_HTTP=$E2E_PLUGIN_HTTP
export E2E_WORKLOAD_IMAGE=$E2E_WORKLOAD_IMAGE
export E2E_BUSYBOX_IMAGE=$E2E_BUSYBOX_IMAGE
export E2E_PROMETHEUS_BIN=$E2E_PROMETHEUS_BIN
export E2E_KUBECTL=$E2E_K8S_BIN/kubectl
export E2E_CTR=$E2E_CONTAINERD_BIN/ctr
export E2E_K8S_VERSION=$K8S_VERSION
export E2E_FEATURE_GATES=$E2E_FEATURE_GATES
export PATH=$E2E_K8S_BIN:$E2E_CONTAINERD_BIN:$E2E_HELM_BIN:$E2E_PROMETHEUS_BIN:\$PATH
ENV
}

# cmd_leftovers lists whatever of the cluster survived `down`.
cmd_leftovers() {
  local found=0 pid exe
  for pid in $(pgrep -f "$E2E_CACHE_DIR/" 2>/dev/null); do
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
    case "$exe" in "$E2E_CACHE_DIR"/*) echo "process $pid: $exe"; found=1 ;; esac
  done
  if ip netns list 2>/dev/null | grep '^vgpudra-'; then found=1; fi
  if ip -o link show 2>/dev/null | grep -E "$E2E_NODES_BRIDGE|$E2E_BRIDGE|vd-node-"; then found=1; fi
  if awk -v d="$E2E_RUN_DIR" 'index($2, d) == 1 {print "mount " $2; found=1} END {exit !found}' /proc/self/mounts; then found=1; fi
  if [ -e "$E2E_RUN_DIR" ]; then echo "state $E2E_RUN_DIR"; found=1; fi
  if ls -d /sys/fs/cgroup/*/vgpu-dra-e2e-* /sys/fs/cgroup/vgpu-dra-e2e-* 2>/dev/null; then found=1; fi
  return $((found))
}

cmd_logs() {
  local n=${1:-60} f
  for f in "$E2E_LOGS"/*.log; do
    [ -f "$f" ] || continue
    printf '\n===== %s (last %s lines) =====\n' "$(basename "$f")" "$n"
    tail -n "$n" "$f"
  done
}

case "${1:-}" in
  build) require_root; say_versions; build_all ;;
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  logs) shift; cmd_logs "$@" ;;
  leftovers) cmd_leftovers ;;
  exec)
    shift
    node=${1:?exec needs a node name}; shift
    [ "${1:-}" = -- ] && shift
    node_index "$node" >/dev/null || exit 2
    node_exec "$node" "${@:-bash}" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
