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

# shellcheck disable=SC2034 # the settings are used by the scripts that source this file
# Shared settings and helpers of the local-cluster harness. Sourced by
# cluster.sh, driver.sh and demo/run.sh; defines no behaviour on its own.
#
# Every path is overridable by env so that CI, the demo and a developer's
# machine can keep their own caches and state side by side.

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$E2E_ROOT/../.." && pwd)

K8S_VERSION=${K8S_VERSION:-v1.37.2}
# The kubelet's version. Kubernetes' skew policy lets kubelets lag the API
# server by up to three minors, and upgrades move the control plane first.
# 1.38's kubelet imports sigs.k8s.io/iptables-wrappers, which the Go module
# proxy does not serve, so with a 1.38 control plane the kubelet is 1.37's
# unless K8S_KUBELET_VERSION names another.
if [ -n "${K8S_KUBELET_VERSION:-}" ]; then
  E2E_KUBELET_NOTE=
else
  case "$K8S_VERSION" in
    v1.38.*)
      K8S_KUBELET_VERSION=v1.37.2
      E2E_KUBELET_NOTE="kubelet $K8S_KUBELET_VERSION, one minor behind: Kubernetes $K8S_VERSION's kubelet imports sigs.k8s.io/iptables-wrappers, which the Go module proxy does not serve (K8S_KUBELET_VERSION picks another)"
      ;;
    *) K8S_KUBELET_VERSION=$K8S_VERSION; E2E_KUBELET_NOTE= ;;
  esac
fi
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}

# Build cache: survives `cluster.sh down`, so a second `up` takes about a minute.
E2E_CACHE_DIR=${E2E_CACHE_DIR:-/var/cache/vgpu-dra-e2e}
# Cluster state: created by `up`, removed by `down`.
E2E_RUN_DIR=${E2E_RUN_DIR:-/var/lib/vgpu-dra-e2e}

# piece_version NAME prints the version of a built piece of the cluster.
piece_version() {
  case "$1" in
    kubernetes) echo "$K8S_VERSION" ;;
    kubelet) echo "$K8S_KUBELET_VERSION" ;;
    containerd) echo "$CONTAINERD_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    prometheus) echo "$PROMETHEUS_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    *) echo "no piece $1" >&2; return 1 ;;
  esac
}

# piece_dir NAME prints the directory of the piece's binaries at its version:
# each version has its own, so no version ever runs another's binaries.
piece_dir() { echo "$E2E_CACHE_DIR/$1/$(piece_version "$1")"; }

E2E_K8S_BIN=$(piece_dir kubernetes)
E2E_KUBELET_BIN=$(piece_dir kubelet)
E2E_CONTAINERD_BIN=$(piece_dir containerd)
E2E_HELM_BIN=$(piece_dir helm)
E2E_PROMETHEUS_BIN=$(piece_dir prometheus)
E2E_KWOK_BIN=$(piece_dir kwok)
# The sandbox image's binary, built from this tree on every `up`.
E2E_PAUSE=$E2E_CACHE_DIR/pause/pause

# say_versions logs which versions run, once per run (the scripts that call
# one another share it through the environment).
say_versions() {
  [ -n "${E2E_VERSIONS_SAID:-}" ] && return 0
  export E2E_VERSIONS_SAID=1
  log "Kubernetes $K8S_VERSION (kubelet $K8S_KUBELET_VERSION), containerd $CONTAINERD_VERSION"
  if [ -n "$E2E_KUBELET_NOTE" ]; then log "$E2E_KUBELET_NOTE"; fi
}

E2E_PKI=$E2E_RUN_DIR/pki
E2E_LOGS=$E2E_RUN_DIR/logs
E2E_PIDS=$E2E_RUN_DIR/pids
E2E_CDI_DIR=${E2E_CDI_DIR:-$E2E_RUN_DIR/cdi}
E2E_KUBELET_DIR=$E2E_RUN_DIR/kubelet
E2E_CONTAINERD_SOCK=$E2E_RUN_DIR/containerd/containerd.sock
E2E_KUBECONFIG=$E2E_PKI/admin.kubeconfig
# The bridge exists only so the node reports Ready: no default route, no masquerade.
E2E_BRIDGE=${E2E_BRIDGE:-vgpudra0}
E2E_POD_CIDR=${E2E_POD_CIDR:-10.244.0.0/24}

# Namespaced nodes sit on a private bridge of this machine, E2E_NODES_NET.0/24:
# the bridge (and the API server) at .1, node i at .1i. No route leads off it.
E2E_NODES_NET=${E2E_NODES_NET:-10.231.0}
E2E_NODES_BRIDGE=${E2E_NODES_BRIDGE:-vgpudra-nodes}

# nodes_init N sets the node layout for N nodes. One node runs the kubelet on
# this machine itself; two or more run each node's kubelet and containerd in
# their own mount, network and UTS namespaces (lib/nodes.sh).
nodes_init() {
  case "$1" in [1-9]) ;; *) echo "E2E_NODES=$1: want 1 to 9" >&2; exit 2 ;; esac
  E2E_NODES=$1
  if [ "$E2E_NODES" -gt 1 ]; then
    E2E_NODE_NAMES=(node-a node-b node-c node-d node-e node-f node-g node-h node-i)
    E2E_NODE_NAMES=("${E2E_NODE_NAMES[@]:0:$E2E_NODES}")
    # The first node is the one the single-node specs use.
    E2E_NODE_NAME=${E2E_NODE_NAMES[0]}
    # Each node sees its own copy of every per-node path under $E2E_RUN_DIR.
    E2E_CDI_DIR=$E2E_RUN_DIR/cdi
    E2E_API_HOST=$E2E_NODES_NET.1
    E2E_PLUGIN_HTTP=$E2E_NODES_NET.11:18080
  else
    E2E_NODE_NAME=${E2E_NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
    E2E_NODE_NAMES=("$E2E_NODE_NAME")
    E2E_API_HOST=127.0.0.1
    # The kubelet plugin's /metrics and /healthz.
    E2E_PLUGIN_HTTP=${E2E_PLUGIN_HTTP:-127.0.0.1:18080}
  fi
}
# `up` records the node count; later commands follow the record unless told.
nodes_init "${E2E_NODES:-$(cat "$E2E_RUN_DIR/node-count" 2>/dev/null || echo 1)}"

# Images are built from files on this machine; pods use imagePullPolicy: Never.
E2E_PAUSE_IMAGE=docker.io/vgpu-dra-e2e/pause:1
E2E_BUSYBOX_IMAGE=docker.io/vgpu-dra-e2e/busybox:1
E2E_WORKLOAD_IMAGE=docker.io/vgpu-dra-e2e/cuda-probe:1

# The DRA features the driver and the specs use, on every component:
# consumable capacity, partitionable devices (MIG), binding conditions and
# device status are beta (on) from 1.36; device taints and extended
# resources too, but 1.35 has them alpha (off), so a 1.35 cluster turns
# them on as well (docs/install.md has the table). E2E_FEATURE_GATES
# replaces the list, e.g. with DRAConsumableCapacity=false to see the
# driver report a missing gate.
e2e_default_gates=DRAConsumableCapacity=true,DRAPartitionableDevices=true,DRADeviceBindingConditions=true,DRAResourceClaimDeviceStatus=true
case $K8S_VERSION in
  v1.35.*) e2e_default_gates+=,DRADeviceTaints=true,DRAExtendedResource=true ;;
esac
E2E_FEATURE_GATES=${E2E_FEATURE_GATES:-$e2e_default_gates}

# containerd finds its shim on PATH; the specs find kubectl and prometheus.
export PATH=$E2E_K8S_BIN:$E2E_CONTAINERD_BIN:$E2E_HELM_BIN:$E2E_PROMETHEUS_BIN:$PATH

# node_ip [NODE] prints a node's IPv4 address: a namespaced node's address on
# the node bridge, or else this machine's own first global address. The
# kubelet refuses a loopback node IP, and traffic must never leave this
# machine, so the address is always one of ours.
node_ip() {
  if [ "$E2E_NODES" -gt 1 ]; then
    local i
    i=$(node_index "${1:-$E2E_NODE_NAME}") || return 1
    echo "$E2E_NODES_NET.$((10 + i))"
    return
  fi
  if [ -n "${E2E_NODE_IP:-}" ]; then echo "$E2E_NODE_IP"; return; fi
  local ip
  ip=$(ip -4 -o addr show scope global 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')
  if [ -z "$ip" ]; then
    echo "no global IPv4 address on this machine; set E2E_NODE_IP" >&2
    return 1
  fi
  echo "$ip"
}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

kc() { "$E2E_K8S_BIN/kubectl" --kubeconfig="$E2E_KUBECONFIG" "$@"; }

# cluster_versions checks that the running API server reports K8S_VERSION and
# every node's kubelet K8S_KUBELET_VERSION, logging what each reports; on a
# mismatch it names both versions and fails.
cluster_versions() {
  local server node kubelet bad=0
  server=$(kc get --raw /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')
  if [ "$server" != "$K8S_VERSION" ]; then
    log "the API server reports ${server:-no version}, but K8S_VERSION is $K8S_VERSION"
    bad=1
  fi
  for node in "${E2E_NODE_NAMES[@]}"; do
    kubelet=$(kc get node "$node" -o jsonpath='{.status.nodeInfo.kubeletVersion}')
    if [ "$kubelet" != "$K8S_KUBELET_VERSION" ]; then
      log "node $node's kubelet reports ${kubelet:-no version}, but K8S_KUBELET_VERSION is $K8S_KUBELET_VERSION"
      bad=1
    fi
  done
  [ $bad -eq 0 ] || return 1
  log "the API server reports $server; the kubelets of ${E2E_NODE_NAMES[*]} report $K8S_KUBELET_VERSION"
}

# node_view NODE prints where this machine keeps what NODE sees as its own
# per-node paths under $E2E_RUN_DIR (kubelet, cdi, driver, containerd, ...).
node_view() {
  if [ "$E2E_NODES" -gt 1 ]; then echo "$E2E_RUN_DIR/nodes/$1"; else echo "$E2E_RUN_DIR"; fi
}

# node_path NODE PATH prints this machine's path of PATH as NODE sees it.
node_path() {
  if [ "$E2E_NODES" -gt 1 ]; then echo "$(node_view "$1")${2#"$E2E_RUN_DIR"}"; else echo "$2"; fi
}

# node_comp NAME NODE prints the harness's name of NODE's component NAME
# (kubelet, containerd): its log $E2E_LOGS/<name>.log and pid file.
node_comp() {
  if [ "$E2E_NODES" -gt 1 ]; then echo "$1-$2"; else echo "$1"; fi
}

# node_index NODE prints NODE's position, from 1.
node_index() {
  local i
  for i in "${!E2E_NODE_NAMES[@]}"; do
    [ "${E2E_NODE_NAMES[$i]}" = "$1" ] && { echo $((i + 1)); return 0; }
  done
  echo "no node $1 (nodes: ${E2E_NODE_NAMES[*]})" >&2
  return 1
}

ctr_node() {
  local node=$1; shift
  "$E2E_CONTAINERD_BIN/ctr" --address "$(node_path "$node" "$E2E_CONTAINERD_SOCK")" --namespace k8s.io "$@"
}
ctr_k8s() { ctr_node "$E2E_NODE_NAME" "$@"; }

# wait_for WHAT SECONDS CMD...: runs CMD until it succeeds, at most SECONDS
# seconds. On timeout it names what it waited for and returns 1, so the caller
# can print the logs that explain it.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "timed out after ${secs}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# wait_started NAME WHAT SECONDS CMD...: like wait_for, but gives up at once
# when the process started as NAME has exited, instead of waiting out the bound.
wait_started() {
  local name=$1 what=$2 secs=$3; shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ! pid_of "$name" >/dev/null; then
      log "$name exited while waiting for $what; the end of $E2E_LOGS/$name.log:"
      tail -n 20 "$E2E_LOGS/$name.log" >&2
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "timed out after ${secs}s waiting for $what; the end of $E2E_LOGS/$name.log:"
      tail -n 20 "$E2E_LOGS/$name.log" >&2
      return 1
    fi
    sleep 0.5
  done
}

# start_bg NAME CMD...: runs CMD in the background with its output in
# $E2E_LOGS/NAME.log and its pid in $E2E_PIDS/NAME.pid. Only processes started
# this way are ever stopped by the harness.
start_bg() {
  local name=$1; shift
  mkdir -p "$E2E_LOGS" "$E2E_PIDS"
  setsid "$@" >>"$E2E_LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$E2E_PIDS/$name.pid"
}

# pid_of NAME prints the pid recorded for NAME if that process still runs the
# binary we started (guards against pid reuse after a crash).
pid_of() {
  local name=$1 pid exe
  pid=$(cat "$E2E_PIDS/$name.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  case "$exe" in
    "$E2E_CACHE_DIR"/*|"$REPO_ROOT"/*|"$E2E_RUN_DIR"/*) echo "$pid" ;;
    *) return 1 ;;
  esac
}

# stop_bg NAME [SECONDS]: SIGTERM, bounded wait, then SIGKILL.
stop_bg() {
  local name=$1 secs=${2:-15} pid
  if pid=$(pid_of "$name"); then
    kill "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + secs))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) ignored SIGTERM for ${secs}s; killing it"
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$E2E_PIDS/$name.pid"
}

require_root() {
  [ "$(id -u)" -eq 0 ] || die "the local cluster needs root (it runs the kubelet, containerd and runc)"
}

# unmount_under DIR: lazily unmounts every mount below DIR, deepest first.
unmount_under() {
  local dir=$1 m
  awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || log "could not unmount $m"; done
}
