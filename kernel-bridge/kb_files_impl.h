/*
 * kb_files_impl: private to kernel-bridge/kb_files*.c: one API call's
 * exchange with the kernel's file helper (kb_files.py), made in kb_files.c
 * (requests, installing the helper, copying in) and used by
 * kb_files_get.c (listing and copying out).
 */
#ifndef KERNEL_BRIDGE_KB_FILES_IMPL_H
#define KERNEL_BRIDGE_KB_FILES_IMPL_H

#include "common/err.h"
#include "kernel-bridge/kb_files.h"
#include "kernel-bridge/kb_kernel.h"

#include <jansson.h>
#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>

/* What any answer but a listing or a chunk may cost. */
#define KB_FX_SMALL_ANSWER (64 * 1024)

/* One API call's state: the kernel, the options, request ids. */
struct kb_fx_ctx {
    kb_kernel_t *k;    /* borrowed */
    const char *dir;   /* borrowed kernel_dir or NULL */
    size_t chunk;      /* clamped chunk_bytes */
    int timeout_ms;    /* per request; 0 = none */
    char nonce[17];    /* random, so stale answers never match */
    unsigned long seq; /* requests sent */
};

/* Fill `c` from the options and install the helper unless this very
 * version answers: 0, or -1 + err. */
int kb_fx_begin(struct kb_fx_ctx *c, kb_kernel_t *k, const kb_files_opts_t *o,
                err_t *err);
/* Send request `req` (stolen) and return the one answer (a new reference)
 * costing at most `cap` bytes, or NULL + err. */
json_t *kb_fx_request(struct kb_fx_ctx *c, json_t *req, size_t cap, err_t *err);
/* Best effort: tell the kernel to drop transfer `t` (op put_abort or
 * get_close); errors ignored (the kernel may be gone). */
void kb_fx_drop(struct kb_fx_ctx *c, const char *op, const char *t);
/* A token the kernel chose (borrowed from `answer`): up to 32 hex digits,
 * or NULL when it is anything else. */
const char *kb_fx_token(json_t *answer);
/* `h` is 64 lowercase hex digits (a SHA-256 the kernel sent). */
bool kb_fx_is_hex64(const char *h);
/* A SHA-256 as 64 lowercase hex digits. */
void kb_fx_hex(char out[65], const unsigned char h[crypto_hash_sha256_BYTES]);

#endif
