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

# Certificates and kubeconfigs of the local cluster: one throwaway CA per
# cluster, client certificates per component, all under $E2E_PKI.

_pki_cert() { # NAME CN ORG [SUBJECT_ALT_NAMES]
  local name=$1 cn=$2 org=$3 san=${4:-}
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" \
    -subj "/CN=$cn${org:+/O=$org}" 2>/dev/null
  if [ -n "$san" ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$name.ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' >"$name.ext"
  fi
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out "$name.crt" -days 30 -extfile "$name.ext" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

_pki_kubeconfig() { # NAME CERT
  cat >"$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: vgpu-dra-e2e
  cluster: {certificate-authority: $E2E_PKI/ca.crt, server: "https://$E2E_API_HOST:6443"}
users:
- name: $1
  user: {client-certificate: $E2E_PKI/$2.crt, client-key: $E2E_PKI/$2.key}
contexts:
- name: vgpu-dra-e2e
  context: {cluster: vgpu-dra-e2e, user: $1}
current-context: vgpu-dra-e2e
KC
}

make_pki() {
  local ip=$1
  rm -rf "$E2E_PKI"
  mkdir -p "$E2E_PKI"
  (
    cd "$E2E_PKI" || exit 1
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
      -subj "/CN=vgpu-dra-e2e-ca" 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    _pki_cert apiserver kube-apiserver "" \
      "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.96.0.1,IP:$ip,IP:$E2E_API_HOST"
    _pki_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
    _pki_cert admin admin system:masters
    _pki_cert scheduler system:kube-scheduler ""
    _pki_cert controller-manager system:kube-controller-manager ""
    _pki_kubeconfig admin admin
    _pki_kubeconfig scheduler scheduler
    _pki_kubeconfig controller-manager controller-manager
    # Each node's kubelet has its own identity (the Node authorizer and
    # NodeRestriction hold it to its own node) and serving certificate.
    local node kubelet
    for node in "${E2E_NODE_NAMES[@]}"; do
      kubelet=$(node_comp kubelet "$node")
      _pki_cert "$kubelet" "system:node:$node" system:nodes
      _pki_cert "$kubelet-serving" "$node" "" "DNS:$node,DNS:localhost,IP:127.0.0.1,IP:$(node_ip "$node")"
      _pki_kubeconfig "$kubelet" "$kubelet"
    done
  )
}
