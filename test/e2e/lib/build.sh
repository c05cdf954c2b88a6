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
# binaries from the Go module proxy. Each piece (kubernetes, kubelet,
# containerd, helm, prometheus, kwok) of each version has its own directory,
# $E2E_CACHE_DIR/PIECE/VERSION (common.sh names them), which exists only once
# the piece is completely built: a build writes into PIECE/VERSION.partial and
# renames it when every step has succeeded, so a failed or interrupted build
# leaves nothing that counts as built. Only the first run of a version is slow.

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

# The Go toolchain for the builds whose module needs a newer Go than this
# machine's: the go command fetches it from the module proxy. Only those
# builds use it; every other build, and the project itself, use the machine's Go.
E2E_GO_TOOLCHAIN=${E2E_GO_TOOLCHAIN:-go1.27.3}

# Builds run niced: on a small machine they would otherwise starve everything
# else, and the cache makes them a one-time cost. GOTOOLCHAIN is local unless
# the caller names the toolchain, so that nothing but the modules is fetched.
# A failing go command is named with its arguments as the build's failed step.
_go() {
  local toolchain=${GOTOOLCHAIN_FOR_BUILD:-local} rc=0
  CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=$toolchain nice -n 10 go "$@" || rc=$?
  [ $rc -eq 0 ] || echo "failed step: GOTOOLCHAIN=$toolchain go $* (exit $rc)" >&2
  return $rc
}

# _mod_file MODULE@VERSION downloads the module and prints the path of its go.mod.
_mod_file() {
  local file
  file=$(cd "$E2E_CACHE_DIR" && _go mod download -json "$1" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$file" ] || die "go mod download did not produce the go.mod of $1"
  echo "$file"
}

# _go_directive GOMOD prints the Go version the module's go directive asks for.
_go_directive() { awk '$1 == "go" { print $2; exit }' "$1"; }

# _version_le A B succeeds when Go version A is not newer than B.
_version_le() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]; }

# _toolchain_for MODULE@VERSION GOMOD prints the GOTOOLCHAIN its build needs:
# local when the machine's Go is new enough, else $E2E_GO_TOOLCHAIN (said on
# fd 3, the user's terminal while a piece builds).
_toolchain_for() {
  local need have
  need=$(_go_directive "$2")
  have=$(GOTOOLCHAIN=local go env GOVERSION)
  have=${have#go}
  if [ -z "$need" ] || _version_le "$need" "$have"; then
    echo local
    return
  fi
  _version_le "$need" "${E2E_GO_TOOLCHAIN#go}" ||
    die "$1 needs go $need, newer than E2E_GO_TOOLCHAIN=$E2E_GO_TOOLCHAIN; set it to a toolchain the module proxy serves"
  log "building $1 with $E2E_GO_TOOLCHAIN: it needs go $need, this machine has go$have" 2>&3
  echo "$E2E_GO_TOOLCHAIN"
}

_version_ldflags() {
  local version=$1 minor ld="-s -w" p
  minor=$(echo "$version" | cut -d. -f2)
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld="$ld -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "$ld"
}

# _build_k8s VERSION OUT PACKAGE...: builds the packages of Kubernetes VERSION
# into OUT. The k8s.io/kubernetes module replaces its staging repos with local
# paths, so a scratch module requires it and points every staging repo at its
# published v0.x tag instead.
_build_k8s() {
  local version=$1 out=$2; shift 2
  local src staging=v0.${version#v1.} modfile toolchain p
  # One scratch module per piece and version (OUT is PIECE/VERSION.partial).
  src=$E2E_CACHE_DIR/src/$(basename "$(dirname "$out")")-$version
  modfile=$(_mod_file "k8s.io/kubernetes@$version")
  toolchain=$(_toolchain_for "k8s.io/kubernetes@$version" "$modfile")
  rm -rf "$src"
  mkdir -p "$src"
  {
    printf 'module vgpu-dra-e2e/kubernetes\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' \
      "$(_go_directive "$modfile")" "$version"
    sed -n '/^replace (/,/^)/p' "$modfile" | awk '/=>/ {print $1}' |
      while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
    printf ')\n'
  } >"$src/go.mod"
  {
    printf '//go:build tools\n\n// Package tools pins the commands the e2e cluster runs.\npackage tools\n\nimport (\n'
    for p in "$@"; do printf '\t_ "%s"\n' "$p"; done
    printf ')\n'
  } >"$src/tools.go"
  (cd "$src" && GOTOOLCHAIN_FOR_BUILD=$toolchain _go mod tidy)
  (cd "$src" && GOTOOLCHAIN_FOR_BUILD=$toolchain _go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "$(_version_ldflags "$version")" -o "$out/" "$@")
}

# build_kubernetes VERSION OUT: the control plane, kubectl and etcd.
build_kubernetes() {
  _build_k8s "$1" "$2" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl go.etcd.io/etcd/server/v3
  # etcd's main package is named after its directory.
  mv "$2/server" "$2/etcd"
}

# build_kubelet VERSION OUT: the kubelet, a piece of its own so that it can
# run another version than the control plane (K8S_KUBELET_VERSION).
build_kubelet() { _build_k8s "$1" "$2" k8s.io/kubernetes/cmd/kubelet; }

# _go_install VERSION OUT MODULE LDFLAGS [TAGS] PACKAGE...: installs the
# module's packages at VERSION into OUT.
_go_install() {
  local version=$1 out=$2 module=$3 ldflags=$4 tags=$5 modfile toolchain p pkgs=()
  shift 5
  modfile=$(_mod_file "$module@$version")
  toolchain=$(_toolchain_for "$module@$version" "$modfile")
  for p in "$@"; do pkgs+=("$p@$version"); done
  GOBIN=$out GOTOOLCHAIN_FOR_BUILD=$toolchain _go install -trimpath ${tags:+-tags "$tags"} \
    -ldflags "$ldflags" "${pkgs[@]}"
}

build_containerd() {
  local m=github.com/containerd/containerd/v2
  _go_install "$1" "$2" "$m" "-s -w -X $m/version.Version=$1" no_btrfs \
    "$m/cmd/containerd" "$m/cmd/containerd-shim-runc-v2" "$m/cmd/ctr"
}

# build_helm: the helm client that installs the driver's chart.
build_helm() { _go_install "$1" "$2" helm.sh/helm/v3 "-s -w" "" helm.sh/helm/v3/cmd/helm; }

# build_prometheus: the Prometheus server the metrics spec scrapes the driver
# with (test/e2e/prometheus_test.go). Built from the module proxy it has no
# web UI assets; the HTTP query API is all the spec uses.
build_prometheus() {
  _go_install "$1" "$2" github.com/prometheus/prometheus "-s -w" "" \
    github.com/prometheus/prometheus/cmd/prometheus
}

# build_kwok: the KWOK controller of the scale benchmark (test/scale), with
# its stage configuration: KWOK's own shipped stages (node initialisation,
# heartbeat with leases, pods ready and deleted at once), read from the
# module it was built from.
build_kwok() {
  local dir f
  _go_install "$1" "$2" sigs.k8s.io/kwok "-s -w" "" sigs.k8s.io/kwok/cmd/kwok
  dir=$(cd "$E2E_CACHE_DIR" && _go mod download -json "sigs.k8s.io/kwok@$1" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir/kustomize/stage" ] || die "go mod download did not produce sigs.k8s.io/kwok@$1"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    printf -- '---\n'
    cat "$dir/kustomize/stage/$f"
  done >"$2/kwok-stages.yaml"
}

# build_pause builds the sandbox image's only binary from test/e2e/pause.
build_pause() {
  mkdir -p "$(dirname "$E2E_PAUSE")"
  (cd "$REPO_ROOT" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" \
    -o "$E2E_PAUSE" ./test/e2e/pause)
}

# Build times are kept per piece in $E2E_BUILD_TIMES ("name seconds" lines)
# so that the next first build of it can say how long it will take.
E2E_BUILD_TIMES=$E2E_CACHE_DIR/build-times

_last_build_time() {
  [ -f "$E2E_BUILD_TIMES" ] || return 0
  awk -v n="$1" '$1 == n { t = $2 } END { if (t != "") print t }' "$E2E_BUILD_TIMES"
}

# _run_build NAME VERSION OUT runs build_NAME VERSION OUT in a new shell with
# errexit on everywhere (a caller's `||` turns it off in functions and
# subshells, but not in another process), so that the first failing step ends
# the build; the ERR trap writes which step it was as the log's last line.
_run_build() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  "$BASH" -c 'set -eEuo pipefail
    shopt -s inherit_errexit
    source "$1/lib/common.sh"
    source "$1/lib/build.sh"
    trap '\''echo "failed step: ${BASH_SOURCE[0]##*/}:$LINENO: $BASH_COMMAND (exit $?)" >&2'\'' ERR
    "build_$2" "$3" "$4"' build "$E2E_ROOT" "$@"
}

# build_piece NAME WHAT ESTIMATE: builds piece NAME at its wanted version into
# its directory unless it is there, saying what it builds and how long it took
# last time (else ESTIMATE). Output goes to $E2E_CACHE_DIR/build-NAME-VERSION.log;
# on failure the log's end is shown, with the step that failed, and the
# partial directory is removed. Builds run without the cluster's lock, so two
# runs may want the same piece at once: the second waits for the first.
build_piece() {
  local dir lock rc=0
  dir=$(piece_dir "$1") || return 1
  [ -f "$dir/.built" ] && return 0
  mkdir -p "$(dirname "$dir")" && exec {lock}>>"$dir.lock" || return 1
  if ! flock -n "$lock"; then
    log "waiting for another run's build of $2"
    flock "$lock"
  fi
  _build_piece_locked "$@" || rc=$?
  exec {lock}>&-
  return $rc
}

_build_piece_locked() {
  local name=$1 what=$2 estimate=$3 version dir log last t0=$SECONDS rc=0 failed
  version=$(piece_version "$name")
  dir=$(piece_dir "$name")
  [ -f "$dir/.built" ] && return 0
  log=$E2E_CACHE_DIR/build-$name-$version.log
  # An interrupted build's directory, or one from before the stamp, is redone.
  rm -rf "$dir" "$dir.partial"
  mkdir -p "$dir.partial" || return 1
  last=$(_last_build_time "$name")
  if [ -n "$last" ]; then
    log "building $what (took ${last}s last time)"
  else
    log "building $what (first run only: $estimate)"
  fi
  _run_build "$name" "$version" "$dir.partial" 3>&2 >"$log" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    rm -rf "$dir.partial"
    failed=$(sed -n 's/^failed step: //p' "$log" | head -n 1)
    log "building $what failed (exit $rc) at: ${failed:-see the log}; the end of $log:"
    tail -n 30 "$log" >&2
    return $rc
  fi
  touch "$dir.partial/.built" && mv "$dir.partial" "$dir" || return 1
  echo "$name $((SECONDS - t0))" >>"$E2E_BUILD_TIMES"
  log "built $what in $((SECONDS - t0))s"
}

# build_all builds what the cluster runs: the Kubernetes control plane and
# kubelet, containerd, helm and the sandbox's pause, plus Prometheus when
# E2E_PROMETHEUS=1 (only `make e2e` scrapes the driver with it; the demo does
# not). The independent builds run side by side when the machine has more
# than two cores (each Go build uses every core anyway, so on two they only
# compete for memory). It stops at the first piece that fails.
build_all() {
  install_deps
  mkdir -p "$E2E_CACHE_DIR"
  local pieces=("kubernetes|Kubernetes $K8S_VERSION (control plane, kubectl) and etcd|~8-10 minutes on 2 cores"
    "kubelet|the kubelet of Kubernetes $K8S_KUBELET_VERSION|~3-5 minutes on 2 cores"
    "containerd|containerd $CONTAINERD_VERSION|~1-2 minutes"
    "helm|helm $HELM_VERSION|~2-4 minutes")
  [ "${E2E_PROMETHEUS:-0}" = 1 ] &&
    pieces+=("prometheus|prometheus $PROMETHEUS_VERSION (for the metrics spec)|~7 minutes on 2 cores")
  local piece name what estimate pids=() failed=0 pid
  for piece in "${pieces[@]}"; do
    IFS='|' read -r name what estimate <<<"$piece"
    if [ "$(nproc)" -gt 2 ]; then
      build_piece "$name" "$what" "$estimate" &
      pids+=($!)
    else
      build_piece "$name" "$what" "$estimate" || { failed=1; break; }
    fi
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
  [ $failed -eq 0 ] || die "a cluster binary failed to build (logs in $E2E_CACHE_DIR/build-*.log)"
  build_pause
}
