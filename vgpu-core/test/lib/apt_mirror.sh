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

# apt_mirror.sh - prints the Debian main archive this machine's apt uses, for
# the tests that fetch NVIDIA's packages from Debian non-free with a private
# apt configuration (test/cudart/run.sh, test/realdrv/run.sh).
#
# Usage: apt_mirror.sh [APT_ETC]   (default /etc/apt)
#
# Reads, in this order, APT_ETC/sources.list.d/*.sources (deb822: the URIs:
# and Suites: fields of each stanza with Types: deb), APT_ETC/sources.list.d/
# *.list and APT_ETC/sources.list (one-line "deb" entries), and prints the
# first http(s) URI that serves a Debian release suite (a codename or
# stable/testing/unstable, optionally -updates or -backports) and is not a
# security archive. VGPU_DEBIAN_MIRROR, when set, is printed instead. Exits 1
# with nothing printed when no entry qualifies.
set -u

if [ -n "${VGPU_DEBIAN_MIRROR:-}" ]; then
    echo "$VGPU_DEBIAN_MIRROR"
    exit 0
fi
etc="${1:-/etc/apt}"

# One "URI SUITE..." line per source entry, deb822 stanzas first.
entries() {
    local f
    for f in "$etc"/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk '
            function flush() {
                if (deb && enabled && uris != "" && suites != "") {
                    n = split(uris, u, " ")
                    for (i = 1; i <= n; i++) print u[i], suites
                }
                deb = 0; uris = ""; suites = ""; enabled = 1
            }
            BEGIN { flush() }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types") deb = (" " val " ") ~ /[ \t]deb[ \t]/
                else if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "enabled") enabled = tolower(val) != "no"
            }
            END { flush() }' "$f"
    done
    for f in "$etc"/sources.list.d/*.list "$etc"/sources.list; do
        [ -r "$f" ] || continue
        # deb [options] URI SUITE COMPONENT...
        sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 { print $2, $3 }'
    done
}

release='^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldoldstable|oldstable|stable|testing|unstable)(-updates|-backports)?$'
entries | while read -r uri suites; do
    case "$uri" in http://* | https://*) ;; *) continue ;; esac
    case "$uri" in *security*) continue ;; esac
    for s in $suites; do
        if [[ "$s" =~ $release ]]; then
            echo "${uri%/}"
            exit 3 # found: stop the loop (subshell)
        fi
    done
done
[ "${PIPESTATUS[1]}" -eq 3 ]
