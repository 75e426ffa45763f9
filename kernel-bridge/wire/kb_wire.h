/*
 * kb_wire: the Jupyter multipart frame format and its HMAC signature.
 * No I/O: it turns a kb_msg_t into frames and frames into a kb_msg_t, so it
 * can be unit-tested and fuzzed without sockets.
 *
 *   [identities...] "<IDS|MSG>" signature header parent_header metadata
 *   content [buffers...]
 *
 * signature = lowercase hex HMAC-SHA256(key, header || parent_header ||
 * metadata || content) over the exact bytes on the wire. A message whose
 * signature is missing or wrong is dropped and counted BEFORE any JSON is
 * parsed: code in a kernel can read the key, but nothing else on the machine
 * can, so a bad signature means a peer that must not be listened to.
 */
#ifndef KERNEL_BRIDGE_KB_WIRE_H
#define KERNEL_BRIDGE_KB_WIRE_H

#include "common/err.h"
#include "kernel-bridge/wire/kb_msg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KB_WIRE_DELIM "<IDS|MSG>"
#define KB_WIRE_DELIM_LEN 9
#define KB_WIRE_SIG_HEX 64

/* A borrowed view of one frame's bytes (e.g. into a zmq_msg_t). */
typedef struct kb_frame {
    const void *data;
    size_t len;
} kb_frame_t;

/* The HMAC key of one connection, with the keyed hash state precomputed.
 * An empty key means messages are neither signed nor checked; it is only
 * accepted when the caller asked for unsigned operation explicitly. */
typedef struct kb_key kb_key_t;

kb_key_t *kb_key_new(const char *key, size_t len);
void kb_key_destroy(kb_key_t **key);
bool kb_key_is_empty(const kb_key_t *key);
/* Hex signature of the four JSON frames into out[65]. With an empty key,
 * out is "". */
void kb_key_sign(const kb_key_t *key, const kb_frame_t parts[4], char out[65]);

/* Bounds on what a peer may make us parse. */
typedef struct kb_wire_limits {
    size_t max_json_bytes; /* per JSON frame; 0 = unlimited */
    int max_json_depth;    /* nesting of arrays/objects; 0 = unlimited */
    /* What one part's parsed tree may cost beyond the part's own length
     * (common/jsonlim.h); 0 = JSONLIM_DEFAULT_ALLOWANCE. */
    size_t json_allowance;
} kb_wire_limits_t;

#define KB_WIRE_DEFAULT_JSON_BYTES ((size_t)256 << 20)
#define KB_WIRE_DEFAULT_JSON_DEPTH 64

/* Counters of what was dropped; the caller owns and may share one. */
typedef struct kb_wire_stats {
    uint64_t accepted;      /* messages parsed and returned */
    uint64_t bad_signature; /* missing/wrong signature: dropped unparsed */
    uint64_t malformed;     /* framing, size, depth or JSON errors */
    uint64_t foreign;       /* not for the waiting receiver: dropped unhashed */
    /* Counted apart by transports that can tell (ZeroMQ, WebSocket): */
    uint64_t oversized;   /* past the message size or frame cap, unread */
    uint64_t bad_channel; /* on a channel that does not exist */
    uint64_t overflow;    /* arrived while the queues were full */
} kb_wire_stats_t;

/* Add each counter of `src` to `dst`. */
void kb_wire_stats_add(kb_wire_stats_t *dst, const kb_wire_stats_t *src);

/* How many messages were refused between the snapshot `before` and `now`
 * (every counter but accepted and foreign: a message for an earlier
 * request is routine), with the breakdown in out[size], e.g.
 * "oversized: 1, malformed: 2" ("" when none; `out` may be NULL when
 * `size` is 0). */
uint64_t kb_wire_stats_refused(const kb_wire_stats_t *before,
                               const kb_wire_stats_t *now, char *out,
                               size_t size);

/* Serialized frames of one message; owns every frame's bytes. */
typedef struct kb_wire_out {
    kb_blob_t *frames; /* owned array of n owned blobs */
    size_t n;
} kb_wire_out_t;

/* Serialize `msg` (identities first) signed with `key`; out must be
 * released with kb_wire_out_release. Returns 0, or -1 if a JSON part
 * cannot be encoded. */
int kb_wire_serialize(const kb_msg_t *msg, const kb_key_t *key,
                      kb_wire_out_t *out, err_t *err);
void kb_wire_out_release(kb_wire_out_t *out);

/* Parse frames into a new message (caller destroys), verifying the
 * signature first. Every JSON part passes the size, depth and parse-cost
 * caps (jsonlim) before it is parsed or kept. Content
 * is parsed at once; header, parent_header and metadata are kept as text
 * when their top level is plainly an object (header.msg_type,
 * header.msg_id and parent_header.msg_id read off it) and parsed on first
 * use, otherwise parsed at once. A signed part broken only inside a nested
 * value then reads as {} instead of dropping the message; only the kernel,
 * which holds the key, can send one. On rejection returns NULL, bumps the
 * matching counter in `stats` (if given) and says why in `err`. `limits`
 * may be NULL for the defaults. */
kb_msg_t *kb_wire_parse(const kb_frame_t *frames, size_t n, const kb_key_t *key,
                        const kb_wire_limits_t *limits, kb_wire_stats_t *stats,
                        err_t *err);

/* Read the top level of the JSON object in s[0..n) without building it:
 * true if it is shaped like one (members "key": value separated by commas;
 * nested values are skipped, their brackets balanced and strings closed),
 * with vals[k] and lens[k] the plain string value of the LAST member named
 * keys[k] (jansson keeps the last of duplicates), NULL if none or not a
 * plain string. False for anything else, escapes in a key or in a wanted
 * value included: the caller then parses the text in full. */
bool kb_wire_scan_object(const char *s, size_t n, const char *const *keys,
                         size_t nkeys, const char **vals, size_t *lens);

/* Depth of the deepest array/object nesting in JSON text, scanning bytes
 * only (strings are skipped), or -1 if brackets are unbalanced. */
int kb_wire_json_depth(const char *text, size_t len);

#endif
