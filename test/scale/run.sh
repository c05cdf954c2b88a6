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

# run.sh: the scale benchmark behind `make scale-bench` and `make scale-smoke`
# (docs/scale.md). For each arm it starts a fresh control plane of its own —
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler from the e2e
# build cache, the KWOK controller and, for the GPU arms, dra-controller — on
# ports and in a directory of its own, so it runs beside the e2e cluster.
# No kubelet, no containerd: KWOK simulates the nodes and marks bound pods
# Running. Every process it started is stopped on exit, failure or interrupt.
#
# Arms, same nodes and same pods in each:
#   a-baseline   the pods without claims: what the scheduler does for plain pods
#   b-scheduler  each pod with a vGPU claim, allocated by kube-scheduler
#   c-binpack    the claims allocated by dra-controller's policy allocator, binpack
#   c-spread     the same with spread
#
# Env: SCALE_NODES=1000 SCALE_GPUS=8 SCALE_PODS=10000 SCALE_STEADY=1000
#      SCALE_RATE=50 (pods/s of the steady phase) SCALE_ARMS="a-baseline ..."
#      SCALE_PROFILE=1 (CPU profiles of kube-scheduler and dra-controller)
#      SCALE_KEEP=1 (keep the run directory) SCALE_DIR (run directory)
#      SCALE_SCHEDULER_QPS=100 SCALE_KCM_QPS=100 (API rate limits of the
#      control plane; see docs/scale.md)
set -euo pipefail

SCALE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The e2e harness's helpers, pointed at this run's directory.
E2E_RUN_DIR=${SCALE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/vgpu-dra-scale.XXXXXX")}
export E2E_RUN_DIR
# shellcheck source=../e2e/lib/common.sh
source "$SCALE_ROOT/../e2e/lib/common.sh"
# shellcheck source=../e2e/lib/build.sh
source "$SCALE_ROOT/../e2e/lib/build.sh"
# shellcheck source=../e2e/lib/pki.sh
source "$SCALE_ROOT/../e2e/lib/pki.sh"

NODES=${SCALE_NODES:-1000}
GPUS=${SCALE_GPUS:-8}
PODS=${SCALE_PODS:-10000}
STEADY=${SCALE_STEADY:-1000}
RATE=${SCALE_RATE:-50}
ARMS=${SCALE_ARMS:-a-baseline b-scheduler c-binpack c-spread}
SCHEDULER_QPS=${SCALE_SCHEDULER_QPS:-100}
KCM_QPS=${SCALE_KCM_QPS:-100}

# Ports of this benchmark's control plane: none of the e2e cluster's.
ETCD_PORT=22379
ETCD_PEER_PORT=22380
APISERVER_PORT=16443
KCM_PORT=20257
SCHEDULER_PORT=20259
KWOK_PORT=20247
CONTROLLER_WEBHOOK=127.0.0.1:28443
CONTROLLER_HTTP=127.0.0.1:28091

RESULTS=$E2E_RUN_DIR/results
PROFILES=$E2E_RUN_DIR/profiles
PLANE=(dra-controller kwok kube-scheduler kube-controller-manager kube-apiserver etcd)

T0=$SECONDS
phase() { log "[$((SECONDS - T0))s] $*"; }

stop_plane() {
  local c
  for c in "${PLANE[@]}"; do stop_bg "$c" 20; done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$rc" -ne 0 ] && [ -d "$E2E_LOGS" ]; then
    log "FAILED (exit $rc); the end of each component log:"
    for f in "$E2E_LOGS"/*.log; do
      [ -f "$f" ] || continue
      printf '\n===== %s =====\n' "$(basename "$f")" >&2
      tail -n 15 "$f" >&2
    done
  fi
  stop_plane
  if [ "${SCALE_KEEP:-0}" = 1 ]; then
    log "kept $E2E_RUN_DIR"
  else
    rm -rf "$E2E_RUN_DIR"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# _ports_free fails when something already listens on a port of ours.
ports_free() {
  local p
  for p in $ETCD_PORT $ETCD_PEER_PORT $APISERVER_PORT $KCM_PORT $SCHEDULER_PORT $KWOK_PORT \
    "${CONTROLLER_WEBHOOK##*:}" "${CONTROLLER_HTTP##*:}"; do
    if ss -ltnH "sport = :$p" 2>/dev/null | grep -q .; then
      die "port $p is in use; is another scale benchmark running?"
    fi
  done
}

write_pki() {
  make_pki "$(node_ip)"
  sed -i "s#https://127.0.0.1:6443#https://127.0.0.1:$APISERVER_PORT#" "$E2E_PKI"/*.kubeconfig
  # The controller's webhook serving certificate, for the API server to call it on loopback.
  (cd "$E2E_PKI" && _pki_cert controller vgpu-dra-controller "" "IP:127.0.0.1")
  cat >"$E2E_RUN_DIR/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $E2E_PKI/scheduler.kubeconfig
  qps: $SCHEDULER_QPS
  burst: $((SCHEDULER_QPS * 2))
leaderElection:
  leaderElect: false
YAML
}

start_plane() {
  local arm=$1
  ports_free
  start_bg etcd "$E2E_K8S_BIN/etcd" --name vgpu-dra-scale --data-dir "$E2E_RUN_DIR/etcd-$arm" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "vgpu-dra-scale=http://127.0.0.1:$ETCD_PEER_PORT"
  wait_started etcd "etcd health" 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || return 1

  start_bg kube-apiserver "$E2E_K8S_BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address="$(node_ip)" --secure-port="$APISERVER_PORT" \
    --endpoint-reconciler-type=none \
    --client-ca-file="$E2E_PKI/ca.crt" \
    --tls-cert-file="$E2E_PKI/apiserver.crt" --tls-private-key-file="$E2E_PKI/apiserver.key" \
    --service-account-key-file="$E2E_PKI/sa.pub" --service-account-signing-key-file="$E2E_PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction --feature-gates="$E2E_FEATURE_GATES"
  wait_started kube-apiserver "kube-apiserver /readyz" 120 kc get --raw=/readyz || return 1

  start_bg kube-controller-manager "$E2E_K8S_BIN/kube-controller-manager" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
    --kubeconfig="$E2E_PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$E2E_PKI/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$E2E_PKI/controller-manager.kubeconfig" \
    --service-account-private-key-file="$E2E_PKI/sa.key" --root-ca-file="$E2E_PKI/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false --feature-gates="$E2E_FEATURE_GATES" \
    --kube-api-qps="$KCM_QPS" --kube-api-burst="$((KCM_QPS * 2))"
  start_bg kube-scheduler "$E2E_K8S_BIN/kube-scheduler" --config="$E2E_RUN_DIR/scheduler.yaml" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" \
    --authentication-kubeconfig="$E2E_PKI/scheduler.kubeconfig" \
    --authorization-kubeconfig="$E2E_PKI/scheduler.kubeconfig" --feature-gates="$E2E_FEATURE_GATES"
  start_bg kwok "$E2E_KWOK_BIN/kwok" --kubeconfig="$E2E_KUBECONFIG" \
    --config="$E2E_KWOK_BIN/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --server-address="127.0.0.1:$KWOK_PORT" --node-lease-duration-seconds=40
  wait_for "ServiceAccount default/default" 120 kc get serviceaccount default || return 1
  kc apply -f "$REPO_ROOT/deviceclasses/" >/dev/null
}

# start_controller POLICY_ALLOCATION [NODE_POLICY GPU_POLICY]
start_controller() {
  local mode=$1 node=${2:-binpack} gpu=${3:-spread}
  kc create namespace vgpu-dra >/dev/null
  start_bg dra-controller "$REPO_ROOT/bin/dra-controller" --kubeconfig="$E2E_KUBECONFIG" \
    --pod-namespace=vgpu-dra --leader-elect=false \
    --webhook-address="$CONTROLLER_WEBHOOK" --http-address="$CONTROLLER_HTTP" --profiling \
    --tls-cert-file="$E2E_PKI/controller.crt" --tls-key-file="$E2E_PKI/controller.key" \
    --policy-allocation="$mode" --default-node-policy="$node" --default-gpu-policy="$gpu"
  wait_started dra-controller "dra-controller /readyz" 120 curl -sf "http://$CONTROLLER_HTTP/readyz" || return 1
  register_webhooks "$mode"
}

# register_webhooks writes the chart's webhook configurations for a
# controller outside the cluster: the same rules and policies, a URL
# instead of a Service. Every claim of the benchmark uses the driver's
# class, so the chart's match condition on the class is left out.
register_webhooks() {
  local mode=$1 ca
  ca=$(base64 -w0 <"$E2E_PKI/ca.crt")
  kc apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: vgpu-dra-controller}
webhooks:
- name: claims.vgpu.dra.dev
  admissionReviewVersions: ["v1"]
  sideEffects: NoneOnDryRun
  failurePolicy: Fail
  timeoutSeconds: 10
  matchPolicy: Equivalent
  rules:
  - {apiGroups: ["resource.k8s.io"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["resourceclaims", "resourceclaimtemplates"]}
  clientConfig: {url: "https://$CONTROLLER_WEBHOOK/validate-resourceclaims", caBundle: "$ca"}
YAML
  [ "$mode" = off ] && return 0
  kc apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: vgpu-dra-controller}
webhooks:
- name: gate-pods.vgpu.dra.dev
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Ignore
  reinvocationPolicy: IfNeeded
  timeoutSeconds: 10
  rules:
  - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  namespaceSelector:
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [vgpu-dra]}
  clientConfig: {url: "https://$CONTROLLER_WEBHOOK/gate-pods", caBundle: "$ca"}
YAML
}

run_arm() {
  local arm=$1 claims=true policy="" desc ctrl_pid=0 pprof_ctrl=""
  case "$arm" in
    a-baseline) claims=false; desc="pods without claims" ;;
    b-scheduler) desc="claims allocated by kube-scheduler" ;;
    c-binpack) policy="binpack/binpack"; desc="claims allocated by the policy allocator, binpack" ;;
    c-spread) policy="spread/spread"; desc="claims allocated by the policy allocator, spread" ;;
    *) die "unknown arm $arm" ;;
  esac
  phase "arm $arm: starting the control plane"
  start_plane "$arm"
  phase "arm $arm: $NODES nodes with $GPUS GPUs each"
  "$E2E_RUN_DIR/bin/scale-bench" nodes --kubeconfig="$E2E_KUBECONFIG" --nodes="$NODES" --gpus="$GPUS"
  case "$arm" in
    b-scheduler) start_controller off ;;
    c-*) start_controller cluster "${policy%/*}" "${policy#*/}" ;;
  esac
  if [ "$arm" != a-baseline ]; then
    ctrl_pid=$(pid_of dra-controller)
    pprof_ctrl="http://$CONTROLLER_HTTP/debug/pprof"
  fi
  local profile=()
  if [ "${SCALE_PROFILE:-0}" = 1 ]; then
    mkdir -p "$PROFILES"
    profile=(--profile-dir="$PROFILES" --scheduler-pprof="https://127.0.0.1:$SCHEDULER_PORT/debug/pprof"
      --controller-pprof="$pprof_ctrl" --client-cert="$E2E_PKI/admin.crt" --client-key="$E2E_PKI/admin.key")
  fi
  phase "arm $arm: $PODS pods, $STEADY of them at $RATE pods/s, the rest as a burst"
  "$E2E_RUN_DIR/bin/scale-bench" pods --kubeconfig="$E2E_KUBECONFIG" --arm="$arm" --description="$desc" \
    --policy="$policy" --claims="$claims" --pods="$PODS" --steady="$STEADY" --rate="$RATE" \
    --nodes="$NODES" --gpus="$GPUS" --out="$RESULTS/$arm.json" \
    --scheduler-pid="$(pid_of kube-scheduler)" --controller-pid="$ctrl_pid" "${profile[@]}"
  stop_plane
  rm -rf "$E2E_RUN_DIR/etcd-$arm"
}

main() {
  ports_free
  mkdir -p "$E2E_RUN_DIR/bin" "$RESULTS"
  [ -x "$REPO_ROOT/bin/dra-controller" ] || die "bin/dra-controller is missing; run make build (or make scale-bench)"
  build_piece kubernetes "Kubernetes $K8S_VERSION (control plane, kubectl) and etcd" "~8-10 minutes on 2 cores"
  build_piece kwok "kwok $KWOK_VERSION" "~3-5 minutes on 2 cores"
  (cd "$REPO_ROOT" && go build -o "$E2E_RUN_DIR/bin/scale-bench" ./test/scale/cmd/scale-bench)
  write_pki
  phase "binaries ready; run directory $E2E_RUN_DIR"
  local arm files=()
  for arm in $ARMS; do
    run_arm "$arm"
    files+=("$RESULTS/$arm.json")
  done
  phase "all arms done: $NODES nodes x $GPUS GPUs, $PODS pods per arm"
  echo
  "$E2E_RUN_DIR/bin/scale-bench" report "${files[@]}"
  if [ "${SCALE_PROFILE:-0}" = 1 ]; then
    local p
    for p in "$PROFILES"/*.pprof; do
      [ -f "$p" ] || continue
      printf '\n== %s: top entries (cumulative) ==\n' "$(basename "$p" .pprof)"
      go tool pprof -top -cum "$p" 2>/dev/null | sed -n '1,30p'
    done
  fi
}

main
