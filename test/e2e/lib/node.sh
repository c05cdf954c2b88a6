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

# Configuration, start and stop of the cluster's processes: etcd and the
# control plane on this machine, and per node a containerd and a kubelet (in
# the node's namespaces when there are several, see nodes.sh).

# write_configs writes every node's containerd, CNI and kubelet configuration
# into the node's view; the paths in them are those the node sees.
write_configs() {
  local node i=0
  for node in "${E2E_NODE_NAMES[@]}"; do
    i=$((i + 1))
    if [ "$E2E_NODES" -eq 1 ]; then
      _write_node_configs "$node" "$(node_ip "$node")" "$E2E_POD_CIDR"
    else
      _write_node_configs "$node" "$(node_ip "$node")" "10.244.$i.0/24"
    fi
  done
}

_write_node_configs() {
  local node=$1 ip=$2 pod_cidr=$3 runc kubelet
  runc=$(command -v runc) || die "runc is not installed"
  kubelet=$(node_comp kubelet "$node")
  local containerd_dir cni_dir kubelet_dir
  containerd_dir=$(node_path "$node" "$E2E_RUN_DIR/containerd")
  cni_dir=$(node_path "$node" "$E2E_RUN_DIR/cni")
  kubelet_dir=$(node_path "$node" "$E2E_KUBELET_DIR")
  mkdir -p "$containerd_dir" "$cni_dir/net.d" "$kubelet_dir" "$(node_path "$node" "$E2E_CDI_DIR")"
  cat >"$containerd_dir/config.toml" <<TOML
version = 3
root = '$E2E_RUN_DIR/containerd/root'
state = '$E2E_RUN_DIR/containerd/state'
[grpc]
  address = '$E2E_CONTAINERD_SOCK'
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '$E2E_PAUSE_IMAGE'
[plugins.'io.containerd.cri.v1.runtime']
  # The driver writes its per-claim specs here; containerd 2.x always has CDI on.
  cdi_spec_dirs = ['$E2E_CDI_DIR']
  # Machines without CAP_SYS_RESOURCE cannot lower oom_score_adj; clamp instead of failing.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '$runc'
        Root = '$E2E_RUN_DIR/runc'
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni', '/opt/cni/bin']
    conf_dir = '$E2E_RUN_DIR/cni/net.d'
TOML
  # A bridge without gateway, default route or masquerade: pods get an address
  # (the node needs a working CNI to be Ready) but no way off this machine.
  cat >"$cni_dir/net.d/10-vgpu-dra-e2e.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "vgpu-dra-e2e", "plugins": [
  {"type": "bridge", "bridge": "$E2E_BRIDGE", "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]],
            "dataDir": "$E2E_RUN_DIR/cni/ipam"}}]}
JSON
  local gates
  gates=$(echo "$E2E_FEATURE_GATES" | sed 's/=/: /g; s/,/, /g')
  local cgroup_root
  cgroup_root=$(node_cgroup_root "$node")
  cat >"$kubelet_dir/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Serve only on the node's own address (the API server reaches it there for exec and logs).
address: $ip
# Some machines of this kind still run cgroup v1, refused by default since 1.35.
failCgroupV1: false
cgroupDriver: cgroupfs
${cgroup_root:+cgroupRoot: $cgroup_root
}containerRuntimeEndpoint: unix://$E2E_CONTAINERD_SOCK
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $E2E_PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $E2E_PKI/$kubelet-serving.crt
tlsPrivateKeyFile: $E2E_PKI/$kubelet-serving.key
failSwapOn: false
resolvConf: ""
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
podLogsDir: $E2E_RUN_DIR/pod-logs
featureGates: {$gates}
YAML
}

# _ports_free fails, naming the port, when something not ours already listens
# on a port the cluster needs: then another cluster runs here and we must not
# touch it.
_ports_free() {
  local p
  for p in 2379 2380 6443 10250 10257 10259; do
    if ss -ltnH "sport = :$p" 2>/dev/null | grep -q .; then
      die "port $p is in use by another process; is another cluster running on this machine?"
    fi
  done
}

start_cluster() {
  local ip=$1 node
  _ports_free
  # Shim sockets go to /run/containerd/s whatever the config says; remember
  # what was there so that stop removes only ours.
  mkdir -p "$E2E_RUN_DIR"
  ls -1 /run/containerd/s 2>/dev/null >"$E2E_RUN_DIR/shim-sockets.before" || true
  _record_host_paths
  if [ "$E2E_NODES" -gt 1 ]; then
    nodes_up || return 1
    node_cgroups_make
  fi

  start_bg etcd "$E2E_K8S_BIN/etcd" --name vgpu-dra-e2e --data-dir "$E2E_RUN_DIR/etcd" --unsafe-no-fsync \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster vgpu-dra-e2e=http://127.0.0.1:2380
  wait_started etcd "etcd health" 60 curl -sf http://127.0.0.1:2379/health || return 1

  # One node: the API server listens on loopback only. Namespaced nodes reach
  # it on the node bridge, which is then its only address.
  local advertise=$ip
  [ "$E2E_NODES" -gt 1 ] && advertise=$E2E_API_HOST
  start_bg kube-apiserver "$E2E_K8S_BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --bind-address="$E2E_API_HOST" --advertise-address="$advertise" --secure-port=6443 \
    --client-ca-file="$E2E_PKI/ca.crt" \
    --tls-cert-file="$E2E_PKI/apiserver.crt" --tls-private-key-file="$E2E_PKI/apiserver.key" \
    --kubelet-client-certificate="$E2E_PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$E2E_PKI/apiserver-kubelet-client.key" \
    --service-account-key-file="$E2E_PKI/sa.pub" --service-account-signing-key-file="$E2E_PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --enable-aggregator-routing=true \
    --kubelet-preferred-address-types=InternalIP \
    --feature-gates="$E2E_FEATURE_GATES"
  wait_started kube-apiserver "kube-apiserver /readyz" 120 kc get --raw=/readyz || return 1

  start_bg kube-controller-manager "$E2E_K8S_BIN/kube-controller-manager" \
    --bind-address=127.0.0.1 \
    --kubeconfig="$E2E_PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$E2E_PKI/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$E2E_PKI/controller-manager.kubeconfig" \
    --service-account-private-key-file="$E2E_PKI/sa.key" --root-ca-file="$E2E_PKI/ca.crt" \
    --cluster-signing-cert-file="$E2E_PKI/ca.crt" --cluster-signing-key-file="$E2E_PKI/ca.key" \
    --use-service-account-credentials=true --leader-elect=false --feature-gates="$E2E_FEATURE_GATES"
  start_bg kube-scheduler "$E2E_K8S_BIN/kube-scheduler" --bind-address=127.0.0.1 \
    --kubeconfig="$E2E_PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig="$E2E_PKI/scheduler.kubeconfig" \
    --authorization-kubeconfig="$E2E_PKI/scheduler.kubeconfig" \
    --leader-elect=false --feature-gates="$E2E_FEATURE_GATES"

  for node in "${E2E_NODE_NAMES[@]}"; do start_node "$node" || return 1; done
  for node in "${E2E_NODE_NAMES[@]}"; do
    wait_started "$(node_comp kubelet "$node")" "node $node Ready" 120 \
      kc wait --for=condition=Ready "node/$node" --timeout=2s || return 1
  done
  # Pods created before the controller has made it are refused.
  wait_for "ServiceAccount default/default" 120 kc get serviceaccount default || return 1
}

# start_node NODE starts the node's containerd, imports the images into it
# and starts its kubelet, in the node's namespaces.
start_node() {
  local node=$1 containerd kubelet
  containerd=$(node_comp containerd "$node")
  kubelet=$(node_comp kubelet "$node")
  node_enter "$node" || return 1
  start_bg "$containerd" "${NODE_ENTER[@]}" "$E2E_CONTAINERD_BIN/containerd" --config "$E2E_RUN_DIR/containerd/config.toml"
  wait_started "$containerd" "containerd of node $node" 60 ctr_node "$node" version || return 1
  import_images "$node"
  start_bg "$kubelet" "${NODE_ENTER[@]}" "$E2E_KUBELET_BIN/kubelet" --config="$E2E_KUBELET_DIR/config.yaml" \
    --kubeconfig="$E2E_PKI/$kubelet.kubeconfig" --root-dir="$E2E_KUBELET_DIR" \
    --hostname-override="$node" --node-ip="$(node_ip "$node")" --v=2
}

# _kill_our_shims kills containerd shims that run our binary; their pods'
# processes die with them.
_kill_our_shims() {
  local pid exe
  for pid in $(pgrep -f containerd-shim-runc-v2 2>/dev/null); do
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
    [ "$exe" = "$E2E_CONTAINERD_BIN/containerd-shim-runc-v2" ] && kill -9 "$pid" 2>/dev/null
  done
  return 0
}

stop_cluster() {
  local node
  for node in "${E2E_NODE_NAMES[@]}"; do stop_node "$node"; done
  _kill_our_shims
  stop_bg kube-scheduler
  stop_bg kube-controller-manager
  stop_bg kube-apiserver
  stop_bg etcd
  # Whatever a node left running dies with its namespaces.
  nodes_down
  unmount_under "$E2E_RUN_DIR"
  _remove_our_shim_sockets
  ip link del "$E2E_BRIDGE" 2>/dev/null || true
  _remove_pod_cgroups
  _remove_host_paths
}

# stop_node NODE stops NODE's kubelet, its containers and its containerd.
stop_node() {
  local node=$1 containerd c
  containerd=$(node_comp containerd "$node")
  stop_bg "$(node_comp kubelet "$node")" 20
  if pid_of "$containerd" >/dev/null; then
    for c in $(ctr_node "$node" tasks ls -q 2>/dev/null); do ctr_node "$node" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    sleep 1
    for c in $(ctr_node "$node" tasks ls -q 2>/dev/null); do ctr_node "$node" tasks rm -f "$c" >/dev/null 2>&1 || true; done
    # CNI caches results per sandbox outside any configurable directory (a
    # namespaced node's copy goes with the run directory).
    if [ "$E2E_NODES" -eq 1 ]; then
      for c in $(ctr_node "$node" containers ls -q 2>/dev/null); do rm -f "/var/lib/cni/results/cni-loopback-$c-lo"; done
    fi
  fi
  stop_bg "$containerd" 20
}

# Paths outside $E2E_RUN_DIR that the kubelet and the CNI plugins use
# whatever their configuration says.
_HOST_PATHS=(/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd)
# containerd creates the default CNI configuration directory even when told
# to use another; it is removed only while empty, as someone may fill it.
_HOST_EMPTY_DIRS=(/etc/cni/net.d /etc/cni)

_record_host_paths() {
  local p
  for p in "${_HOST_PATHS[@]}" "${_HOST_EMPTY_DIRS[@]}"; do
    [ -e "$p" ] && echo "$p"
  done >"$E2E_RUN_DIR/host-paths.before"
  return 0
}

# _remove_host_paths removes the fixed paths this cluster created, and from
# those that were there before only its own entries.
_remove_host_paths() {
  local before=$E2E_RUN_DIR/host-paths.before p l
  [ -f "$before" ] || return 0
  for p in "${_HOST_PATHS[@]}"; do
    grep -qxF "$p" "$before" || rm -rf "$p"
  done
  for p in "${_HOST_EMPTY_DIRS[@]}"; do
    grep -qxF "$p" "$before" || rmdir "$p" 2>/dev/null || true
  done
  for l in /var/log/containers/*.log; do
    [ -L "$l" ] || continue
    case "$(readlink "$l")" in "$E2E_RUN_DIR"/*) rm -f "$l" ;; esac
  done
  rm -f /var/lib/cni/results/vgpu-dra-e2e-*
}

_remove_our_shim_sockets() {
  local before=$E2E_RUN_DIR/shim-sockets.before s
  [ -f "$before" ] || return 0
  for s in /run/containerd/s/*; do
    [ -e "$s" ] || continue
    grep -qxF "$(basename "$s")" "$before" || rm -f "$s"
  done
}

# _remove_pod_cgroups removes the (empty, after the kill) cgroups our kubelet
# made; kubepods is the kubelet's own cgroup root.
_remove_pod_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/vgpu-dra-e2e-* /sys/fs/cgroup/vgpu-dra-e2e-*; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}
