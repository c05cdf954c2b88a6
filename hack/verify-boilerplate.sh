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

# Fails when a source file git knows (Go, C, assembly, shell, Python,
# Makefiles, Dockerfiles) lacks the licence header of
# hack/boilerplate/boilerplate.txt at its top (any year), in the file's
# comment syntax: a /* */ block for Go and C (after Go build constraints),
# "# " lines for the others (after a shebang or a shellcheck directive). Generated Go files carry it
# through deepcopy-gen's --go-header-file. Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."
header=hack/boilerplate/boilerplate.txt

# want KIND: the header as it must appear, with the year as a pattern.
want() {
  case $1 in
    block) { echo '/*'; cat "$header"; echo '*/'; } ;;
    hash) sed -e 's/^/# /' -e 's/ *$//' "$header" ;;
  esac | sed -e 's/Copyright [0-9]\{4\}/Copyright YEAR/'
}

bad=0
while IFS= read -r -d '' f; do
  case $f in
    */testdata/*|_output/*) continue ;;
    *.go|*.c|*.h|*.S) kind=block ;;
    *.sh|*.py|*.mk|*/Makefile|Makefile|*/Dockerfile|.ci/run) kind=hash ;;
    *) continue ;;
  esac
  [ -f "$f" ] || continue
  n=$(want "$kind" | wc -l)
  # The header's first line: the file's first line, after Go build
  # constraints and their blank line, or after a shebang.
  got=$(awk -v n="$n" '
    NR == 1 && (/^#!/ || /^# shellcheck /) { next }
    !started && (/^\/\/go:build/ || /^\/\/ \+build/ || /^$/) { next }
    { started = 1; print; if (++printed == n) exit }' "$f" |
    sed -e 's/Copyright [0-9]\{4\}/Copyright YEAR/')
  if [ "$got" != "$(want "$kind")" ]; then
    echo "$f: missing or changed licence header (see $header)" >&2
    bad=1
  fi
done < <(git ls-files -z --cached --others --exclude-standard)
if [ $bad -ne 0 ]; then
  echo "verify-boilerplate: add the header above (hack/boilerplate/boilerplate.txt)" >&2
  exit 1
fi
echo "verify-boilerplate: every source file has the licence header"
