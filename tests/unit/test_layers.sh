#!/bin/sh
# TAP: the layering in docs/ARCHITECTURE.md holds in the sources.
#
#   1. No upward include: a file includes only headers of its own layer or
#      of layers below it, in this order (lowest first):
#          common sandbox kernel-bridge packages notebook-io agent
#      and inside agent/: llm and session, then loop, then kernel, then mcp,
#      then e2b, then cli.
#   2. No include circle between modules. A module is NAME.c with NAME.h
#      (NAME_impl.h, a private header shared by a family of files, counts
#      as NAME); module A depends on B when A.c or A.h includes B.h. The
#      circles are found by tsort(1) over those edges.
#   3. kernel-bridge/wire/ is a codec without I/O: no file there includes,
#      itself or through the project headers it includes, zmq.h,
#      sys/socket.h, libwebsockets.h or a curl header, and none includes a
#      header of transport/, launch/ or pool/ (the layers that do).
cd "$(dirname "$0")/../.." || exit 2
. tests/tap.sh
T=$(mktemp -d /tmp/ja-layers-XXXXXX)
trap 'rm -rf "$T"' EXIT

rank() { # path -> layer rank
    case $1 in
    common/*) echo 0 ;;
    sandbox/*) echo 1 ;;
    kernel-bridge/*) echo 2 ;;
    packages/*) echo 3 ;;
    notebook-io/*) echo 4 ;;
    agent/llm/* | agent/session/*) echo 5 ;;
    agent/loop/*) echo 6 ;;
    agent/kernel/*) echo 7 ;;
    agent/mcp/*) echo 8 ;;
    agent/e2b/*) echo 9 ;;
    agent/*) echo 10 ;;
    *) echo 99 ;;
    esac
}

module() { # file -> module name
    m=${1%.*}
    echo "${m%_impl}"
}

# "FILE INCLUDED" for every quoted include of the layers' sources; an
# include without a directory is relative to the including file.
files=$(ls common/*.[ch] sandbox/*.[ch] sandbox/*/*.[ch] kernel-bridge/*.[ch] \
    kernel-bridge/*/*.[ch] packages/*.[ch] packages/*/*.[ch] \
    notebook-io/*.[ch] notebook-io/*/*.[ch] agent/*.[ch] agent/*/*.[ch] \
    2>/dev/null)
for f in $files; do
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
        while read -r inc; do
            case $inc in
            */*) echo "$f $inc" ;;
            *) echo "$f $(dirname "$f")/$inc" ;;
            esac
        done
done >"$T/includes"
count=$(wc -l <"$T/includes" | tr -d ' ')
[ "$count" -gt 100 ]
ok $? "the include graph was read ($count includes in $(echo "$files" | wc -w | tr -d ' ') files)"

# 1. Upward includes.
: >"$T/up"
while read -r f inc; do
    [ -e "$inc" ] || continue # a system header in quotes, if any
    if [ "$(rank "$inc")" -gt "$(rank "$f")" ]; then
        echo "$f includes $inc (a higher layer)" >>"$T/up"
    fi
done <"$T/includes"
[ ! -s "$T/up" ]
ok $? "no file includes a header of a higher layer ($(wc -l <"$T/up" | tr -d ' ') found)"
diag "$T/up"

# 2. Circles between modules.
while read -r f inc; do
    [ -e "$inc" ] || continue
    a=$(module "$f")
    b=$(module "$inc")
    [ "$a" = "$b" ] || echo "$a $b"
done <"$T/includes" | sort -u >"$T/edges"
tsort "$T/edges" >/dev/null 2>"$T/tsort"
# tsort prints each loop as "tsort: -: input contains a loop:" followed by
# its members, one per line.
awk '/input contains a loop/ { if (c) print c; c = ""; next }
     { sub(/^tsort: /, ""); c = c (c ? " " : "") $0 }
     END { if (c) print c }' "$T/tsort" >"$T/loops"
[ ! -s "$T/loops" ]
ok $? "no include circle between modules ($(wc -l <"$T/loops" | tr -d ' ') found)"
diag "$T/loops"

# 3. The wire layer does no I/O. io_includes FILE...: every forbidden
# system header reached from FILEs through quoted project includes, as
# "FILE reaches HEADER (through CHAIN)".
io_includes() {
    for start in "$@"; do
        seen=" $start "
        todo="$start"
        while [ -n "$todo" ]; do
            set -- $todo
            cur=$1
            shift
            todo="$*"
            sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/\1/p' "$cur" |
                grep -E '^(zmq\.h|sys/socket\.h|libwebsockets\.h|curl/)' |
                sed "s|^|$start reaches <|; s|\$|> (in $cur)|"
            for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$cur"); do
                case $inc in
                */*) ;;
                *) inc="$(dirname "$cur")/$inc" ;;
                esac
                [ -e "$inc" ] || continue
                case $seen in *" $inc "*) continue ;; esac
                seen="$seen$inc "
                todo="$todo $inc"
            done
        done
    done
}
wire=$(ls kernel-bridge/wire/*.[ch] 2>/dev/null)
[ -n "$wire" ]
ok $? "kernel-bridge/wire/ exists ($(echo "$wire" | wc -w | tr -d ' ') files)"
io_includes $wire >"$T/wire_io"
[ ! -s "$T/wire_io" ]
ok $? "nothing in kernel-bridge/wire/ includes zmq.h, sys/socket.h, libwebsockets.h or curl ($(wc -l <"$T/wire_io" | tr -d ' ') found)"
diag "$T/wire_io"
grep -E '^kernel-bridge/wire/[^ ]+ kernel-bridge/(transport|launch|pool)/' \
    "$T/includes" >"$T/wire_up"
[ ! -s "$T/wire_up" ]
ok $? "nothing in kernel-bridge/wire/ includes transport/, launch/ or pool/ ($(wc -l <"$T/wire_up" | tr -d ' ') found)"
diag "$T/wire_up"

# The checker itself: the layer order it enforces, and a planted circle is
# caught (so a green result means something).
[ "$(rank agent/cli/x.c)" -gt "$(rank agent/mcp/x.h)" ] &&
    [ "$(rank agent/cli/x.c)" -gt "$(rank agent/e2b/x.h)" ] &&
    [ "$(rank agent/e2b/x.c)" -gt "$(rank agent/mcp/x.h)" ] &&
    [ "$(rank agent/mcp/x.c)" -gt "$(rank agent/kernel/x.h)" ] &&
    [ "$(rank agent/mcp/x.c)" -gt "$(rank agent/loop/x.h)" ] &&
    [ "$(rank agent/llm/x.c)" -gt "$(rank notebook-io/x.h)" ] &&
    [ "$(rank notebook-io/x.c)" -gt "$(rank packages/x.h)" ] &&
    [ "$(rank packages/x.c)" -gt "$(rank kernel-bridge/x.h)" ] &&
    [ "$(rank kernel-bridge/pool/x.c)" -gt "$(rank sandbox/x.h)" ] &&
    [ "$(rank sandbox/x.c)" -gt "$(rank common/x.h)" ]
ok $? "the check ranks the layers common < sandbox < kernel-bridge < packages < notebook-io < agent"
mkdir -p "$T/probe"
printf '#include <stdio.h>\n#include <sys/socket.h>\n' >"$T/probe/io.h"
printf '#include "io.h"\n' >"$T/probe/codec.c"
io_includes "$T/probe/codec.c" | grep -q 'sys/socket.h'
ok $? "the check sees a socket header two includes away"
printf 'a b\nb c\nc a\n' | tsort >/dev/null 2>"$T/probe.err"
grep -q "loop" "$T/probe.err"
ok $? "the check sees a circle of three modules"

done_testing
