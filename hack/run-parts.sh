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

# run-parts.sh TITLE COMMAND... -- PART...
#
# Runs "COMMAND PART" for each PART in turn (make test and make accuracy run
# their make targets so), stopping at the first that fails, and prints at the
# end, also after a failure or an interrupt, the seconds each part took: the
# next slowdown shows where it is.
#
# Suites that cannot run on this machine (not root: no private mount
# namespace) append "SUITE: why" to the file VGPU_TEST_SKIP_LOG names (C:
# check_unavailable in vgpu-core/test/check.h, Go: internal/testenv, scripts:
# vgpu-core/test/lib/skip.sh). The outermost run-parts.sh makes that
# file and prints how many suites did not run; under CI they fail instead.
set -uo pipefail

title=$1
shift
cmd=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    cmd+=("$1")
    shift
done
[ $# -gt 0 ] || { echo "usage: run-parts.sh TITLE COMMAND... -- PART..." >&2; exit 2; }
shift
parts=("$@")

own_log=""
if [ -z "${VGPU_TEST_SKIP_LOG:-}" ]; then
    own_log="$(mktemp /tmp/vgpu-test-skipped-XXXXXX)"
    export VGPU_TEST_SKIP_LOG="$own_log"
fi

seconds=()
state=()
start=$(date +%s)

report() {
    local i total=$(($(date +%s) - start))
    echo
    echo "$title: seconds per part"
    for i in "${!parts[@]}"; do
        if [ "$i" -lt "${#seconds[@]}" ]; then
            printf '  %-24s %6s  %s\n' "${parts[$i]}" "${seconds[$i]}" "${state[$i]}"
        else
            printf '  %-24s %6s  %s\n' "${parts[$i]}" "-" "not run"
        fi
    done
    printf '  %-24s %6s\n' "total" "$total"
    if [ -n "$own_log" ]; then
        if [ -s "$own_log" ]; then
            echo
            echo "$(sort -u "$own_log" | wc -l) suite(s) did not run on this machine (CI fails them):"
            sort -u "$own_log" | sed 's/^/  /'
        fi
        rm -f "$own_log"
    fi
}
trap report EXIT
trap 'exit 130' INT TERM

for part in "${parts[@]}"; do
    t0=$(date +%s)
    "${cmd[@]}" "$part"
    rc=$?
    seconds+=($(($(date +%s) - t0)))
    if [ "$rc" -ne 0 ]; then
        state+=("FAILED (exit $rc)")
        exit "$rc"
    fi
    state+=("ok")
done
