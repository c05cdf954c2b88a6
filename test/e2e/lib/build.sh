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

# Installs the host packages the cluster needs and builds the cluster's
# binaries from the Go module proxy into $E2E_BIN. Each build is skipped when
# its stamp matches the wanted version, so only the first run is slow; each
# says how long it took the last time it ran on this machine.

# Debian packages: runc for containers, the CNI plugins for the node's pod
# network, busybox for the test images' shells.
E2E_APT_PACKAGES=(runc containernetworking-plugins busybox-static iproute2 openssl util-linux)

install_deps() {
  local missing=() p
  for p in "${E2E_APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Builds run niced: on a small machine they would otherwise starve everything
# else, and the cache makes them a one-time cost.
_go() { CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 10 go "$@"; }

_version_ldflags() {
  local minor ld="-s -w" p
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "$ld"
}

# build_kubernetes builds the control plane, kubelet, kubectl and etcd. The
# k8s.io/kubernetes module replaces its staging repos with local paths, so a
# scratch module requires it and points every staging repo at its published
# v0.x tag instead.
build_kubernetes() {
  local stamp=$E2E_BIN/.kubernetes-$K8S_VERSION
  local src=$E2E_CACHE_DIR/src/kubernetes staging=v0.${K8S_VERSION#v1.} modfile
  mkdir -p "$src" "$E2E_BIN"
  modfile=$(cd "$src" && _go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$modfile" ] || die "go mod download did not produce the k8s.io/kubernetes@$K8S_VERSION go.mod"
  {
    printf 'module vgpu-dra-e2e/kubernetes\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
    sed -n '/^replace (/,/^)/p' "$modfile" | awk '/=>/ {print $1}' |
      while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
    printf ')\n'
  } >"$src/go.mod"
  cat >"$src/tools.go" <<'GO'
//go:build tools

// Package tools pins the commands the e2e cluster runs.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  (cd "$src" && _go mod tidy)
  (cd "$src" && _go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$(_version_ldflags)" \
    -o "$E2E_BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet go.etcd.io/etcd/server/v3)
  # etcd's main package is named after its directory.
  mv "$E2E_BIN/server" "$E2E_BIN/etcd"
  touch "$stamp"
}

build_containerd() {
  local stamp=$E2E_BIN/.containerd-$CONTAINERD_VERSION
  local m=github.com/containerd/containerd/v2
  GOBIN=$E2E_BIN _go install -trimpath -tags no_btrfs \
    -ldflags "-s -w -X $m/version.Version=$CONTAINERD_VERSION" \
    "$m/cmd/containerd@$CONTAINERD_VERSION" \
    "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "$m/cmd/ctr@$CONTAINERD_VERSION"
  touch "$stamp"
}

HELM_VERSION=${HELM_VERSION:-v3.22.0}

# build_helm builds the helm client that installs the driver's chart.
build_helm() {
  local stamp=$E2E_BIN/.helm-$HELM_VERSION
  GOBIN=$E2E_BIN _go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  touch "$stamp"
}

PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}

# build_prometheus builds the Prometheus server the metrics spec scrapes the
# driver with (test/e2e/prometheus_test.go). Built from the module proxy it
# has no web UI assets; the HTTP query API is all the spec uses.
build_prometheus() {
  local stamp=$E2E_BIN/.prometheus-$PROMETHEUS_VERSION
  GOBIN=$E2E_BIN _go install -trimpath -ldflags "-s -w" \
    "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
  touch "$stamp"
}

# build_pause builds the sandbox image's only binary from test/e2e/pause.
build_pause() {
  mkdir -p "$E2E_BIN"
  (cd "$REPO_ROOT" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" \
    -o "$E2E_BIN/pause" ./test/e2e/pause)
}

# Build times are kept per piece in $E2E_BUILD_TIMES ("name seconds" lines)
# so that the next first build of it can say how long it will take.
E2E_BUILD_TIMES=$E2E_CACHE_DIR/build-times

_last_build_time() {
  awk -v n="$1" '$1 == n { t = $2 } END { if (t != "") print t }' "$E2E_BUILD_TIMES" 2>/dev/null
}

# _timed_build NAME WHAT ESTIMATE: runs build_NAME when its stamp is missing,
# saying what it builds and how long it took last time (else ESTIMATE), and
# records the time it took. Output goes to $E2E_CACHE_DIR/build-NAME.log.
_timed_build() {
  local name=$1 what=$2 estimate=$3 last t0=$SECONDS rc=0
  "_${name}_built" && return 0
  last=$(_last_build_time "$name")
  if [ -n "$last" ]; then
    log "building $what (took ${last}s last time)"
  else
    log "building $what (first run only: $estimate)"
  fi
  "build_$name" >"$E2E_CACHE_DIR/build-$name.log" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    log "building $what failed (exit $rc); its log follows"
    tail -n 40 "$E2E_CACHE_DIR/build-$name.log" >&2
    return $rc
  fi
  echo "$name $((SECONDS - t0))" >>"$E2E_BUILD_TIMES"
  log "built $what in $((SECONDS - t0))s"
}

_kubernetes_built() { [ -f "$E2E_BIN/.kubernetes-$K8S_VERSION" ]; }
_containerd_built() { [ -f "$E2E_BIN/.containerd-$CONTAINERD_VERSION" ]; }
_helm_built() { [ -f "$E2E_BIN/.helm-$HELM_VERSION" ]; }
_prometheus_built() { [ -f "$E2E_BIN/.prometheus-$PROMETHEUS_VERSION" ]; }

# build_all builds what the cluster runs: Kubernetes, containerd, helm and
# the sandbox's pause, plus Prometheus when E2E_PROMETHEUS=1 (only `make e2e`
# scrapes the driver with it; the demo does not). The independent builds run
# side by side when the machine has more than two cores (each Go build uses
# every core anyway, so on two they only compete for memory).
build_all() {
  install_deps
  mkdir -p "$E2E_CACHE_DIR" "$E2E_BIN"
  local pieces=("kubernetes|Kubernetes $K8S_VERSION and etcd|~8-10 minutes on 2 cores"
    "containerd|containerd $CONTAINERD_VERSION|~1-2 minutes"
    "helm|helm $HELM_VERSION|~2-4 minutes")
  [ "${E2E_PROMETHEUS:-0}" = 1 ] &&
    pieces+=("prometheus|prometheus $PROMETHEUS_VERSION (for the metrics spec)|~7 minutes on 2 cores")
  local piece name what estimate pids=() failed=0 pid
  for piece in "${pieces[@]}"; do
    IFS='|' read -r name what estimate <<<"$piece"
    if [ "$(nproc)" -gt 2 ]; then
      _timed_build "$name" "$what" "$estimate" &
      pids+=($!)
    else
      _timed_build "$name" "$what" "$estimate" || failed=1
    fi
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
  [ $failed -eq 0 ] || die "a cluster binary failed to build (logs in $E2E_CACHE_DIR/build-*.log)"
  build_pause
}
