#!/bin/sh
# TAP: no source file of the library is over 900 lines (CONTRIBUTING.md,
# "Adding a source file"). A file that would cross it is split along a seam,
# one job per file, the family sharing a private NAME_impl.h. Counted:
# every .c, .h and .py under the six layers (tracked or new, not ignored).
cd "$(dirname "$0")/../.." || exit 2
. tests/tap.sh
T=$(mktemp -d /tmp/ja-lines-XXXXXX)
trap 'rm -rf "$T"' EXIT
MAX=900
LAYERS="common sandbox kernel-bridge packages notebook-io agent"

# over MAX FILE...: "LINES FILE" for each file longer than MAX lines
# (one wc for them all).
over() {
    max=$1
    shift
    wc -l "$@" | awk -v max="$max" '$2 != "total" && $1 > max'
}

# shellcheck disable=SC2086
files=$(git ls-files -co --exclude-standard -- $(for l in $LAYERS; do
    printf '%s/*.c %s/*.h %s/*.py ' "$l" "$l" "$l"
done))
set -- $files
[ "$#" -gt 100 ]
ok $? "read $# library sources"

# shellcheck disable=SC2086
over "$MAX" $files >"$T/over"
[ ! -s "$T/over" ]
ok $? "no library source is over $MAX lines ($(wc -l <"$T/over" | tr -d ' ') are)"
diag "$T/over"

# shellcheck disable=SC2086
echo "# the longest: $(wc -l $files | grep -v ' total$' | sort -n | tail -1)"

# The checker itself: a file one line over is caught, one at the limit not.
seq 1 $((MAX + 1)) >"$T/long.c"
seq 1 "$MAX" >"$T/at.c"
over "$MAX" "$T/long.c" "$T/at.c" >"$T/probe"
grep -q "long.c" "$T/probe" && ! grep -q "at.c" "$T/probe"
ok $? "the check sees a file of $((MAX + 1)) lines and passes one of $MAX"

done_testing
