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

# run.sh: the whole end-to-end run behind `make e2e`: bring up a fresh local
# cluster, install the driver on simulated GPUs, run the specs, and always
# tear the cluster down again. Needs root and `make build`. See docs/e2e.md.
#
# Env: E2E_NODES=2           nodes of the cluster (default 2: each in its own
#                            namespaces; 1 runs the kubelet on this machine)
#      E2E_KEEP_CLUSTER=1    leave the cluster (and driver) running afterwards
#      E2E_REUSE_CLUSTER=1   use a running cluster instead of starting fresh
#      E2E_RUN=REGEX         run only the matching specs (go test -run)
#      E2E_TIMEOUT=30m       bound of the spec run
set -euo pipefail

export E2E_NODES=${E2E_NODES:-2}
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
say_versions
require_root

T0=$SECONDS
phase() { log "[$((SECONDS - T0))s] $*"; }

teardown() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    phase "FAILED (exit $rc); component logs follow"
    "$E2E_ROOT/cluster.sh" logs 40 || true
  fi
  if [ "${E2E_KEEP_CLUSTER:-0}" = 1 ]; then
    phase "keeping the cluster: test/e2e/cluster.sh down stops it"
  else
    "$E2E_ROOT/cluster.sh" down || true
    # The teardown is part of what is tested: it must leave nothing behind.
    if ! "$E2E_ROOT/cluster.sh" leftovers >&2; then
      phase "the teardown left the above behind"
      [ "$rc" -eq 0 ] && rc=1
    fi
    phase "cluster torn down"
  fi
  exit "$rc"
}
trap teardown EXIT
# Bash runs traps only between foreground commands, so the long-running spec
# run goes to the background in its own process group, to be stopped at once.
SPECS_PID=
on_signal() {
  [ -n "$SPECS_PID" ] && kill -- "-$SPECS_PID" 2>/dev/null
  exit 130
}
trap on_signal INT TERM

# The metrics spec scrapes the driver with Prometheus, which the demo's
# cluster does not build; a reused cluster may be the demo's.
export E2E_PROMETHEUS=1
if [ "${E2E_REUSE_CLUSTER:-0}" = 1 ]; then
  "$E2E_ROOT/cluster.sh" build
  "$E2E_ROOT/cluster.sh" up
else
  "$E2E_ROOT/cluster.sh" up --fresh
fi
phase "cluster up"
"$E2E_ROOT/driver.sh" install
phase "driver installed"

# shellcheck disable=SC1091
source "$E2E_RUN_DIR/env"
cd "$E2E_ROOT"
# shellcheck disable=SC2016 # expanded by the inner shell
setsid bash -c 'set -o pipefail; go test -tags e2e -count=1 -v -timeout "$1" ${2:+-run "$2"} . 2>&1 | tee "$3"' \
  specs "${E2E_TIMEOUT:-30m}" "${E2E_RUN:-}" "$E2E_LOGS/specs.log" &
SPECS_PID=$!
wait "$SPECS_PID"
SPECS_PID=
phase "specs passed"
grep '^E2E-MEASURE' "$E2E_LOGS/specs.log" | sed 's/^E2E-MEASURE /measured: /' >&2 || true
