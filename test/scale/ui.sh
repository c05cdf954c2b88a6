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

# ui.sh KUBECONFIG: `kubectl vgpu ui` against the scale benchmark's cluster
# (run.sh calls it after an arm's pods when SCALE_UI=1). It prints the time
# from starting the command to its first page with the whole fleet (every
# node and GPU), to the page with the claims and Pending pods too, the
# time and size of a page load after that (plain and gzipped), and the command's peak memory
# (VmHWM) after the page has followed the cluster for SCALE_UI_WATCH
# seconds; it fails above 2 s to the first page or 200 MiB.
set -euo pipefail
kubeconfig=$1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PORT=${SCALE_UI_PORT:-28097}
WATCH=${SCALE_UI_WATCH:-30}
page=$(mktemp)
log=$(mktemp)
pid=
# shellcheck disable=SC2317 # run by the trap
finish() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -f "$page" "$log"
}
trap finish EXIT

start=$(date +%s%N)
"$ROOT/bin/kubectl-vgpu" --kubeconfig="$kubeconfig" ui --port "$PORT" >"$log" 2>&1 &
pid=$!
# The page says "Listing the cluster…" until the informers have synced.
until curl -sf -o "$page" "http://127.0.0.1:$PORT/" && ! grep -q 'Listing the cluster' "$page"; do
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.05
done
first_ms=$((($(date +%s%N) - start) / 1000000))
gpus=$(grep -o '<span id="t-gpus">[^<]*' "$page" | sed 's/.*>//')
nodes=$(grep -o '<span id="t-nodes">[^<]*' "$page" | sed 's/.*>//')
# Then "Listing claims and pods…" until those are listed too.
until curl -sf -o "$page" "http://127.0.0.1:$PORT/" && ! grep -q 'Listing claims and pods' "$page"; do
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.05
done
complete_ms=$((($(date +%s%N) - start) / 1000000))
pending=$(grep -o '<span id="t-pending">[^<]*' "$page" | sed 's/.*>//')
read -r load_s size < <(curl -sf -o /dev/null -w '%{time_total} %{size_download}\n' "http://127.0.0.1:$PORT/")
gz_size=$(curl -sf --compressed -o /dev/null -w '%{size_download}' "http://127.0.0.1:$PORT/")
sleep "$WATCH"
hwm_kib=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
rss_kib=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
printf 'kubectl vgpu ui: first page %d ms after start (%s, %s), with claims and pods %d ms (%s); a later page load %s s, %d bytes (%d gzipped); peak RSS %d MiB (RSS %d MiB after %ss)\n' \
  "$first_ms" "$nodes" "$gpus" "$complete_ms" "$pending" "$load_s" "$size" "$gz_size" $((hwm_kib / 1024)) $((rss_kib / 1024)) "$WATCH"
ok=0
[ "$first_ms" -le 2000 ] || { echo "ui.sh: the first page took more than 2 s" >&2; ok=1; }
[ "$hwm_kib" -le $((200 * 1024)) ] || { echo "ui.sh: kubectl vgpu ui used more than 200 MiB" >&2; ok=1; }
exit "$ok"
