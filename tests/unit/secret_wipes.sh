#!/bin/sh
# Secrets are wiped with sodium_memzero (common/secret.h), never with a
# plain memset before free: that is a dead store a compiler may drop. Fails
# on a memset of anything named like a key, token, auth or header line in
# the library (tests and benchmarks may do as they like).
set -u
. tests/tap.sh
files=$(git ls-files 'common/*.c' 'sandbox/*.c' 'kernel-bridge/*.c' \
    'packages/*.c' 'notebook-io/*.c' 'agent/*.c' 2>/dev/null)
pattern='memset\([^,]*(key|token|auth|secret|passw|header|cred)[^,]*, *0'
hits=$(grep -nE "$pattern" $files 2>/dev/null)
[ -z "$hits" ]
ok $? "no plain memset wipes a key, token, auth or header string in the library"
[ -n "$hits" ] && echo "$hits" | sed 's/^/# /'
printf 'char *key; memset(key, 0, strlen(key));\n' | grep -qE "$pattern"
ok $? "the check notices memset(key, 0, ...)"
printf 'sodium_memzero(key, strlen(key));\n' | grep -qE "$pattern"
[ $? != 0 ]
ok $? "the check lets sodium_memzero through"
done_testing
