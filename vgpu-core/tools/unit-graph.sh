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

# unit-graph.sh - prints which units of libvgpu.so call which (from the objects'
# defined and undefined symbols) and fails when two units call each other,
# directly or around a loop: each unit of src/ must sit on one layer. It also
# fails when an exported name says another unit: a vgpu_<unit>_ name belongs
# to that unit, and any other vgpu_<word>_ prefix to one unit only.
#
# usage: tools/unit-graph.sh [--edges]   (any directory; CC names the compiler)
#   --edges  also print the graph, one "caller -> callee" line per edge
set -euo pipefail
cc=${CC:-gcc}
edges=false
[ "${1:-}" = --edges ] && edges=true
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for src in src/*.c; do
    unit=$(basename "$src" .c)
    "$cc" -std=gnu11 -D_GNU_SOURCE -fPIC -Iinclude -Isrc -O1 -Werror=implicit-function-declaration -c -o "$tmp/$unit.o" "$src"
    nm --defined-only -g "$tmp/$unit.o" | awk -v u="$unit" 'NF == 3 { print $3, u }' >>"$tmp/defs"
    nm --undefined-only -g "$tmp/$unit.o" | awk -v u="$unit" '{ print u, $NF }' >>"$tmp/uses"
done
# Edges: caller unit -> the unit defining the symbol (libc and the driver drop out).
awk 'NR == FNR { def[$1] = $2; next } ($2 in def) && def[$2] != $1 { print $1, def[$2] }' \
    "$tmp/defs" "$tmp/uses" | sort -u >"$tmp/edges"
$edges && sed 's/ / -> /' "$tmp/edges"
# tsort prints the loop's members on stderr and exits non-zero when the graph has one.
if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/loops"; then
    echo "unit-graph: the units of libvgpu.so call each other in a loop:" >&2
    grep -v '^tsort: .*input contains a loop' "$tmp/loops" | sed 's/^tsort: /  /' >&2
    exit 1
fi
# Prefixes: the longest unit name a vgpu_ name starts with must be its
# unit's; a name starting with no unit's name is owned by its first word,
# which no other unit may use.
printf '%s\n' src/*.c | sed 's|.*/||; s|\.c$||' >"$tmp/units"
awk 'NR == FNR { unit[$1] = 1; next }
    $1 ~ /^vgpu_/ {
        owner = ""
        for (u in unit)
            if ((index($1, "vgpu_" u "_") == 1 || $1 == "vgpu_" u) && length(u) > length(owner))
                owner = u
        if (owner != "") {
            if (owner != $2)
                printf "  %s (in %s) is named after %s\n", $1, $2, owner
            next
        }
        split($1, w, "_")
        if ((w[2] in word) && word[w[2]] != $2)
            printf "  %s (in %s): vgpu_%s_ names belong to %s\n", $1, $2, w[2], word[w[2]]
        else
            word[w[2]] = $2
    }' "$tmp/units" "$tmp/defs" >"$tmp/prefixes"
if [ -s "$tmp/prefixes" ]; then
    echo "unit-graph: exported names that say another unit (name them vgpu_<unit>_):" >&2
    cat "$tmp/prefixes" >&2
    exit 1
fi
echo "unit-graph: no loops ($(wc -l <"$tmp/edges") edges), every exported prefix has one unit"
