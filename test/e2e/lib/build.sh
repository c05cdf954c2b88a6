# shellcheck shell=bash
# Installs the host packages the cluster needs and builds the cluster's
# binaries from the Go module proxy into $E2E_BIN. Each build is skipped when
# its stamp matches the wanted version, so only the first run is slow.

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
  [ -f "$stamp" ] && return 0
  local src=$E2E_CACHE_DIR/src/kubernetes staging=v0.${K8S_VERSION#v1.} modfile
  mkdir -p "$src" "$E2E_BIN"
  log "building Kubernetes $K8S_VERSION and etcd (first run only: ~8-10 minutes on 2 cores)"
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
  [ -f "$stamp" ] && return 0
  log "building containerd $CONTAINERD_VERSION (first run only: ~1-2 minutes)"
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
  [ -f "$stamp" ] && return 0
  log "building helm $HELM_VERSION (first run only: ~2-4 minutes)"
  GOBIN=$E2E_BIN _go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  touch "$stamp"
}

PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}

# build_prometheus builds the Prometheus server the metrics spec scrapes the
# driver with (test/e2e/prometheus_test.go). Built from the module proxy it
# has no web UI assets; the HTTP query API is all the spec uses.
build_prometheus() {
  local stamp=$E2E_BIN/.prometheus-$PROMETHEUS_VERSION
  [ -f "$stamp" ] && return 0
  log "building prometheus $PROMETHEUS_VERSION (first run only: ~7 minutes on 2 cores)"
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

build_all() {
  install_deps
  build_kubernetes
  build_containerd
  build_helm
  build_prometheus
  build_pause
}
