#!/bin/sh
# TAP: docs/ARCHITECTURE.md describes the tree as it is.
#
#   1. Every folder it names (a path ending in "/" in `code` or **bold**,
#      written from the repository's root) exists.
#   2. Every source folder exists in it: each folder of the six layers
#      that holds .c, .h or .py files is named by its whole path.
cd "$(dirname "$0")/../.." || exit 2
. tests/tap.sh
T=$(mktemp -d /tmp/ja-archtree-XXXXXX)
trap 'rm -rf "$T"' EXIT
DOC=docs/ARCHITECTURE.md
LAYERS="common sandbox kernel-bridge packages notebook-io agent"

# named DOC: the folders DOC names, one a line.
named() {
    grep -oE '(`|\*\*)[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/(`|\*\*)' "$1" |
        sed -E 's/^(`|\*\*)//; s/(`|\*\*)$//' | sort -u
}

# sources: every layer folder holding sources, as "DIR/", one a line.
sources() {
    for l in $LAYERS; do
        find "$l" -type f \( -name '*.c' -o -name '*.h' -o -name '*.py' \)
    done | sed 's|/[^/]*$|/|' | sort -u
}

# missing NAMED SOURCES: what a tree lacks and what the doc lacks.
check() {
    : >"$T/gone"
    while read -r d; do
        [ -d "$d" ] || echo "$DOC names $d, which does not exist" >>"$T/gone"
    done <"$1"
    : >"$T/unnamed"
    while read -r d; do
        grep -qxF "$d" "$1" || echo "$d holds sources and is not in $DOC" >>"$T/unnamed"
    done <"$2"
}

named "$DOC" >"$T/named"
sources >"$T/sources"
[ "$(wc -l <"$T/named")" -ge 10 ] && [ "$(wc -l <"$T/sources")" -ge 10 ]
ok $? "read $(wc -l <"$T/named" | tr -d ' ') folders named in $DOC, $(wc -l <"$T/sources" | tr -d ' ') source folders"
check "$T/named" "$T/sources"
[ ! -s "$T/gone" ]
ok $? "every folder $DOC names exists ($(wc -l <"$T/gone" | tr -d ' ') missing)"
diag "$T/gone"
[ ! -s "$T/unnamed" ]
ok $? "every source folder is named in $DOC ($(wc -l <"$T/unnamed" | tr -d ' ') unnamed)"
diag "$T/unnamed"

# The checker itself: a doc naming a folder that is gone, and a source
# folder that no doc names, are both caught.
printf 'see `kernel-bridge/nowhere/` and **common/**\n' >"$T/probe.md"
named "$T/probe.md" >"$T/probe.named"
printf 'common/\nkernel-bridge/wire/\n' >"$T/probe.sources"
check "$T/probe.named" "$T/probe.sources"
grep -q 'kernel-bridge/nowhere/' "$T/gone" && grep -q '^kernel-bridge/wire/' "$T/unnamed"
ok $? "the check sees a named folder that is gone and a source folder left out"

done_testing
