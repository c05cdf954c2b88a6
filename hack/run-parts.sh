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
# A PART written LANE+LANE... runs its lanes side by side, each lane its
# parts (separated by commas) in turn: "lint,go-test+vgpu-core-test" runs
# lint then go-test while vgpu-core-test runs. That gains where parts wait
# (processes starting and ending, valgrind running one thread at a time)
# and costs nothing where they would each fill the cores. Each part of a
# lane writes to a log of its own, printed whole when the part ends, so that
# the lanes' output does not interleave. A lane stops at its first failure;
# the other lanes run to their end, then run-parts fails. Parts run side by
# side must not build the same files: build them in a part before.
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
groups=("$@")

own_log=""
if [ -z "${VGPU_TEST_SKIP_LOG:-}" ]; then
    own_log="$(mktemp /tmp/vgpu-test-skipped-XXXXXX)"
    export VGPU_TEST_SKIP_LOG="$own_log"
fi
# One file per part: "SECONDS EXIT-STATUS", and the log of a part run
# beside others.
results="$(mktemp -d /tmp/vgpu-run-parts-XXXXXX)"

# Every part, in the order written, for the table.
names=()
for group in "${groups[@]}"; do
    IFS='+' read -ra lanes <<<"$group"
    for lane in "${lanes[@]}"; do
        IFS=',' read -ra lane_parts <<<"$lane"
        names+=("${lane_parts[@]}")
    done
done

start=$(date +%s)
# The lanes running side by side now.
pids=()

report() {
    local i secs rc total=$(($(date +%s) - start))
    # Lanes still running (an interrupt): stop them.
    [ "${#pids[@]}" -eq 0 ] || kill "${pids[@]}" 2>/dev/null
    echo
    echo "$title: seconds per part"
    for i in "${!names[@]}"; do
        if [ -f "$results/$i" ]; then
            read -r secs rc <"$results/$i"
            if [ "$rc" -eq 0 ]; then
                printf '  %-24s %6s  %s\n' "${names[$i]}" "$secs" "ok"
            else
                printf '  %-24s %6s  %s\n' "${names[$i]}" "$secs" "FAILED (exit $rc)"
            fi
        else
            printf '  %-24s %6s  %s\n' "${names[$i]}" "-" "not run"
        fi
    done
    printf '  %-24s %6s\n' "total" "$total"
    rm -rf "$results"
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

# run_part INDEX: runs part INDEX, its output to the terminal.
run_part() {
    local t0 rc
    t0=$(date +%s)
    "${cmd[@]}" "${names[$1]}"
    rc=$?
    echo "$(($(date +%s) - t0)) $rc" >"$results/$1"
    return "$rc"
}

# run_lane INDEX...: runs the parts in turn beside other lanes, each into
# its log, printed when it ends; stops at the first that fails.
run_lane() {
    local i t0 rc
    for i in "$@"; do
        t0=$(date +%s)
        "${cmd[@]}" "${names[$i]}" >"$results/$i.log" 2>&1
        rc=$?
        echo "$(($(date +%s) - t0)) $rc" >"$results/$i"
        {
            flock 9
            echo "==== ${names[$i]} (run beside other parts; exit $rc)"
            cat "$results/$i.log"
            echo "==== end of ${names[$i]}"
        } 9>"$results/print.lock"
        [ "$rc" -eq 0 ] || return "$rc"
    done
}

next=0
for group in "${groups[@]}"; do
    IFS='+' read -ra lanes <<<"$group"
    if [ "${#lanes[@]}" -eq 1 ] && [[ "$group" != *,* ]]; then
        run_part "$next" || exit $?
        next=$((next + 1))
        continue
    fi
    echo "== side by side: ${group//+/ | } (each part's output when it ends)"
    pids=()
    for lane in "${lanes[@]}"; do
        IFS=',' read -ra lane_parts <<<"$lane"
        indexes=()
        for _ in "${lane_parts[@]}"; do
            indexes+=("$next")
            next=$((next + 1))
        done
        run_lane "${indexes[@]}" &
        pids+=($!)
    done
    failed=0
    for pid in "${pids[@]}"; do
        wait "$pid" || failed=$?
    done
    pids=()
    [ "$failed" -eq 0 ] || exit "$failed"
done
