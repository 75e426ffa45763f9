#!/bin/sh
# "The one place X lives" promises hold: the version only in
# common/version.h, --max-output's default only in kernel-bridge/kb_output.h,
# millisecond clocks only in common/clock.c (a condition wait's absolute
# timespec is not a clock reading and is allowed), a JSON object's member
# read by a helper only in common/jget.c (no private getter copies).
set -u
. tests/tap.sh
lib=$(git ls-files 'common/*.[ch]' 'sandbox/*.[ch]' 'kernel-bridge/*.[ch]' \
    'packages/*.[ch]' 'notebook-io/*.[ch]' 'agent/*.[ch]' 2>/dev/null)

hits=$(grep -nE '#[[:space:]]*define[[:space:]]+JUPYTER_AGENT_VERSION' $lib |
    grep -v '^common/version.h:')
[ -z "$hits" ]
ok $? "JUPYTER_AGENT_VERSION is defined only in common/version.h"
[ -n "$hits" ] && echo "$hits" | sed 's/^/# /'

hits=$(grep -nE '#[[:space:]]*define[[:space:]]+(KB_)?DEFAULT_MAX_OUTPUT' $lib |
    grep -v '^kernel-bridge/kb_output.h:')
[ -z "$hits" ]
ok $? "the default --max-output is defined only in kernel-bridge/kb_output.h"
[ -n "$hits" ] && echo "$hits" | sed 's/^/# /'

hits=$(grep -nE 'tv_sec \* 1000 \+|tv_nsec / 1000000' $lib |
    grep -v '^common/clock.c:')
[ -z "$hits" ]
ok $? "milliseconds from a timespec are computed only in common/clock.c (clock_mono_ms)"
[ -n "$hits" ] && echo "$hits" | sed 's/^/# /'
hits=$(grep -nE 'json_(string|integer)_value\(json_object_get\([a-z_]+, key\)\)|return json_is_(string|integer|boolean)\(v\) \?' $lib |
    grep -v '^common/jget.c:')
[ -z "$hits" ]
ok $? "a JSON member is read by a getter only in common/jget.c (jget_str, jget_strict, jget_int, jget_bool)"
[ -n "$hits" ] && echo "$hits" | sed 's/^/# /'
done_testing
