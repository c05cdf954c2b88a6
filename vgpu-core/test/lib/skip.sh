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

# skip.sh - sourced by the test scripts (test/realdrv/run.sh,
# test/cudart/run.sh): how a suite that cannot run here says so, as
# check_unavailable (test/check.h) does for the C tests.
#
# skipped SUITE WHY...: prints "SKIP SUITE: WHY", appends "SUITE: WHY" to the
# file VGPU_TEST_SKIP_LOG names (make test counts the suites that did not
# run) and exits 0. For what this machine may lack by chance (a network
# fetch).
skipped() {
    local suite=$1
    shift
    echo "SKIP $suite: $*"
    if [ -n "${VGPU_TEST_SKIP_LOG:-}" ]; then
        echo "$suite: $*" >>"$VGPU_TEST_SKIP_LOG"
    fi
    exit 0
}

# unavailable SUITE WHY...: as skipped, except under CI (CI set, as .ci/run
# does), where it fails: there a suite that did not run must not pass. For
# what a test machine must have (root, unshare).
unavailable() {
    if [ -n "${CI:-}" ]; then
        echo "FAIL $1: did not run under CI: ${*:2}" >&2
        exit 1
    fi
    skipped "$@"
}
