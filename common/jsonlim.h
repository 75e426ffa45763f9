/*
 * jsonlim: JSON from a peer, parsed only when the parse fits a budget.
 *
 * jansson builds a tree that costs far more than its text: 40 bytes for a
 * `0` that took 2 bytes to send, 88 for "", 136 for [], 233 for {} and
 * ~120 per object member (measured, jansson 2.14 on x86-64). So 48 MiB of
 * `[0,0,...]` costs a GiB, and a size cap alone bounds nothing. Before any
 * text reaches json_loadb, one pass over its bytes (strings skipped, no
 * allocation) measures the nesting depth and what the tree would cost,
 * charged above what jansson really takes:
 *
 *   every value          JSONLIM_COST_VALUE (node and its slot in a parent)
 *   + a string           JSONLIM_COST_STRING + its length (keys too)
 *   + an array           JSONLIM_COST_ARRAY
 *   + an object          JSONLIM_COST_OBJECT
 *
 * and the text is refused, unparsed, when the depth passes max_depth or
 * the cost passes the text's own length plus `allowance`. The tree then
 * costs at most its text again plus the allowance: what a reader holds for
 * one message is at most twice the bytes it received, plus a constant the
 * caller chose (e.g. from its output budget).
 *
 * The one gate for untrusted JSON: kernel messages (kb_wire), gateway
 * frames and replies, MCP requests, notebooks and archives read from disk.
 */
#ifndef COMMON_JSONLIM_H
#define COMMON_JSONLIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define JSONLIM_COST_VALUE 56
#define JSONLIM_COST_STRING 48
#define JSONLIM_COST_ARRAY 96
#define JSONLIM_COST_OBJECT 192

/* Defaults when a field is 0. */
#define JSONLIM_DEFAULT_DEPTH 64
#define JSONLIM_DEFAULT_ALLOWANCE ((size_t)4 << 20)

typedef struct jsonlim {
    int max_depth;    /* nesting of arrays/objects; 0 = default */
    size_t allowance; /* what the tree may cost beyond the text's length,
                         in bytes; 0 = default */
} jsonlim_t;

/* What one pass over JSON text found. */
typedef struct jsonlim_scan {
    int depth;     /* deepest nesting; -1 if brackets do not balance */
    size_t values; /* values, keys included */
    size_t cost;   /* the tree's estimated cost in bytes (saturates) */
} jsonlim_scan_t;

/* Scan `len` bytes of `text` (no allocation, never fails). */
jsonlim_scan_t jsonlim_scan(const char *text, size_t len);

/* True when text of `len` bytes with scan `s` passes `lim` (NULL for the
 * defaults). When it does not and `why` is given, why[size] says which
 * bound it passed, e.g. "JSON of 24000001 values (would cost 1.3 GiB to
 * parse, 52.0 MiB allowed)". */
bool jsonlim_fits(const jsonlim_scan_t *s, size_t len, const jsonlim_t *lim,
                  char *why, size_t size);

/* json_loadb(text, len, flags) when the text passes `lim` (NULL for the
 * defaults); NULL otherwise, with err->text saying why (err may be NULL).
 * Returns a new reference. */
json_t *jsonlim_loadb(const char *text, size_t len, size_t flags,
                      const jsonlim_t *lim, json_error_t *err);

#endif
