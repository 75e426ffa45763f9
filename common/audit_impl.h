/*
 * audit_impl.h: what the writer (audit.c) and the verifier
 * (audit_verify.c) must agree on byte for byte.
 */
#ifndef COMMON_AUDIT_IMPL_H
#define COMMON_AUDIT_IMPL_H

#include "common/audit.h"

#include <stddef.h>

/* prev of a log's first record: SHA-256 of "jupyter-agent audit log
 * v1\n" LOG_ID "\n". */
void audit_genesis(const char *log_id, char out[AUDIT_HASH_HEX]);
/* What a seal signs: "jupyter-agent audit seal v1\n" LOG_ID "\n" SEQ "\n"
 * PREV "\n"; its length. */
size_t audit_seal_message(char *out, size_t size, const char *log_id,
                          long long seq, const char *prev);

#endif
