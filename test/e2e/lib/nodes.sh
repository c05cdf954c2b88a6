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

# Namespaced nodes (E2E_NODES >= 2): each node is a set of namespaces on this
# machine, the way kind uses containers, with no container engine.
#
#   network: its own namespace (/run/netns/vgpudra-NODE), a veth into the
#            node bridge and the address $E2E_NODES_NET.1i; the bridge has no
#            route off this machine and nothing forwards
#   UTS:     the node's name as host name
#   mount:   a private view in which every per-node path under $E2E_RUN_DIR
#            (kubelet, cdi, driver, containerd, cni, pod-logs, runc) and the
#            fixed paths the kubelet, containerd and CNI use whatever their
#            configuration says are bind mounts of $E2E_RUN_DIR/nodes/NODE;
#            mounts made inside (pod volumes, overlays) stay inside
#
# A holder process (the pause binary) keeps the namespaces; the node's
# containerd and kubelet are started into them with nsenter. The pid
# namespace is the machine's: the driver maps container pids as on any node.

# Per-node directories under $E2E_RUN_DIR, and fixed paths of this machine,
# that each node sees as its own.
NODE_RUN_DIRS=(kubelet cdi driver containerd cni pod-logs runc)
NODE_FIXED_PATHS=(/var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /run/containerd /etc/cni)

_netns() { echo "vgpudra-$1"; }

# node_holder NODE prints the pid of the process that holds NODE's
# namespaces, if it still runs in the node's network namespace.
node_holder() {
  local pid
  pid=$(pid_of "$(node_comp ns "$1")") || return 1
  [ "$(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null)" = "$(stat -L -c %i "/run/netns/$(_netns "$1")" 2>/dev/null)" ] || return 1
  echo "$pid"
}

# node_enter NODE sets NODE_ENTER to the command prefix that runs a command
# in NODE's namespaces (empty when the cluster has one node: this machine).
# nsenter execs the command, so a process started this way keeps its pid.
node_enter() {
  local pid
  NODE_ENTER=()
  [ "$E2E_NODES" -eq 1 ] && return 0
  pid=$(node_holder "$1") || { log "node $1 is not up (no namespace holder)"; return 1; }
  NODE_ENTER=(nsenter --target "$pid" --mount --uts --net --)
}

# node_exec NODE CMD...: runs CMD in NODE's namespaces.
node_exec() {
  node_enter "$1" || return 1
  shift
  "${NODE_ENTER[@]}" "$@"
}

# _node_mounts NODE VIEW: the mount setup run inside the node's new mount
# namespace, before the holder takes over.
_node_mounts() {
  local node=$1 view=$2 d p
  hostname "$node"
  for d in "${NODE_RUN_DIRS[@]}"; do
    mkdir -p "$view/$d" "$E2E_RUN_DIR/$d"
    mount --bind "$view/$d" "$E2E_RUN_DIR/$d"
  done
  for p in "${NODE_FIXED_PATHS[@]}"; do
    mkdir -p "$view/host$p" "$p"
    mount --bind "$view/host$p" "$p"
  done
}

# nodes_up creates the bridge and every node's namespaces.
nodes_up() {
  local node ip ns
  ip link add "$E2E_NODES_BRIDGE" type bridge
  ip addr add "$E2E_NODES_NET.1/24" dev "$E2E_NODES_BRIDGE"
  ip link set "$E2E_NODES_BRIDGE" up
  for node in "${E2E_NODE_NAMES[@]}"; do
    ns=$(_netns "$node")
    ip=$(node_ip "$node")
    ip netns add "$ns"
    ip link add "vd-$node" type veth peer name eth0 netns "$ns"
    ip link set "vd-$node" master "$E2E_NODES_BRIDGE" up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    mkdir -p "$(node_view "$node")"
    # The holder is the pause binary, so that pid_of recognises it.
    # shellcheck disable=SC2016 # expanded by the inner shell
    start_bg "$(node_comp ns "$node")" env E2E_RUN_DIR="$E2E_RUN_DIR" E2E_CACHE_DIR="$E2E_CACHE_DIR" \
      E2E_NODES="$E2E_NODES" nsenter --net="/run/netns/$ns" \
      unshare --mount --uts --propagation slave -- \
      bash -c 'source "$1/lib/common.sh"; source "$1/lib/nodes.sh"; _node_mounts "$2" "$3" && exec "$E2E_PAUSE"' \
      node-mounts "$E2E_ROOT" "$node" "$(node_view "$node")"
    # Ready once the mounts are made: the holder has become the pause binary.
    if ! wait_for "the namespaces of node $node" 30 node_holder "$node"; then
      tail -n 20 "$E2E_LOGS/$(node_comp ns "$node").log" >&2
      return 1
    fi
  done
}

# nodes_down kills every process left in a node's network namespace (the
# holder, and anything the kubelet or containerd left behind), then removes
# the namespaces, links and the bridge. Safe on a half-created set.
nodes_down() {
  local ns pids
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^vgpudra-/ {print $1}'); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086 # a list of pids
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null || log "could not remove network namespace $ns"
  done
  rm -f "$E2E_PIDS"/ns-*.pid
  ip link del "$E2E_NODES_BRIDGE" 2>/dev/null || true
}

# nodes_leftovers succeeds when namespaces of an earlier run remain.
nodes_leftovers() {
  ip netns list 2>/dev/null | grep -q '^vgpudra-' || ip link show "$E2E_NODES_BRIDGE" >/dev/null 2>&1
}

# node_cgroup_root NODE prints the cgroup under which NODE's kubelet puts its
# pods ("" for the single node, whose kubelet uses the machine's root).
node_cgroup_root() {
  if [ "$E2E_NODES" -gt 1 ]; then echo "/vgpu-dra-e2e-$1"; fi
}

# node_cgroups_make creates every node's cgroup root in each hierarchy; the
# kubelet refuses a root that does not exist.
node_cgroups_make() {
  local node root h
  for node in "${E2E_NODE_NAMES[@]}"; do
    root=$(node_cgroup_root "$node")
    [ -n "$root" ] || continue
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
      mkdir -p "/sys/fs/cgroup$root"
      continue
    fi
    for h in /sys/fs/cgroup/*/; do
      [ -f "$h/cgroup.procs" ] || continue
      mkdir -p "$h${root#/}"
    done
    # A new cpuset has no CPUs or memory nodes until given its parent's.
    if [ -d "/sys/fs/cgroup/cpuset${root}" ]; then
      cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset${root}/cpuset.cpus"
      cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset${root}/cpuset.mems"
    fi
  done
}
