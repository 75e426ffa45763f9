/*
 * sb_egress_h1: the HTTP/1.1 request stream a box sends inside a TLS
 * connection the egress proxy terminates (--net-secret), rewritten on its
 * way upstream without I/O, so it is unit-tested and fuzzed on bytes.
 *
 * Each request head is read whole (at most SB_EGRESS_HEAD_MAX bytes),
 * checked and written out again with every header named like the secret's
 * dropped and the secret's header added; the body follows by its framing
 * (Content-Length, or chunked with its trailers), byte for byte, so the
 * next request on a kept-alive connection is found where it starts. What
 * the proxy cannot frame safely is refused: both Content-Length and
 * Transfer-Encoding (request smuggling), a transfer coding other than
 * chunked, obsolete line folding, bare LF, a second Host or
 * Content-Length, a Host other than the CONNECT host, CONNECT and TRACE
 * (which would echo the secret back). After a request carrying Upgrade
 * (a WebSocket) the rest of the stream passes unparsed.
 */
#ifndef SANDBOX_SB_EGRESS_H1_H
#define SANDBOX_SB_EGRESS_H1_H

#include "common/buf.h"
#include "sandbox/sb_egress_http.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_EGRESS_HEADER_MAX 64   /* bytes of a secret header's name */
#define SB_EGRESS_SECRET_MAX 8192 /* bytes of a secret header's value */
#define SB_EGRESS_CHUNK_LINE 4096 /* a chunk-size line or a trailer line */

/* The header one host's requests get. Borrowed strings. */
typedef struct sb_egress_inject {
    const char *host;   /* what Host must name (lower case, no port) */
    unsigned port;      /* the CONNECT port; Host may omit it if 443 */
    const char *header; /* the name added ("Authorization") */
    const char *value;  /* its value: no CR, LF or NUL */
    size_t value_len;
} sb_egress_inject_t;

typedef enum sb_egress_h1_state {
    SB_H1_HEAD = 0,   /* collecting a request head */
    SB_H1_BODY,       /* `left` bytes of a Content-Length body */
    SB_H1_CHUNK_LINE, /* collecting a chunk-size line */
    SB_H1_CHUNK_DATA, /* `left` bytes of chunk data */
    SB_H1_CHUNK_CRLF, /* the CRLF after chunk data (`left` of 2 bytes) */
    SB_H1_TRAILER,    /* collecting trailer lines up to the blank one */
    SB_H1_RAW,        /* after an Upgrade: bytes pass as they are */
    SB_H1_DEAD        /* refused: nothing more passes */
} sb_egress_h1_state_t;

/* One direction's parser; zero it to start (sb_egress_h1_init). */
typedef struct sb_egress_h1 {
    sb_egress_h1_state_t state;
    uint64_t left;     /* BODY, CHUNK_DATA, CHUNK_CRLF: bytes to come */
    bool upgrade;      /* the request being passed asked for Upgrade */
    unsigned requests; /* heads rewritten so far */
    size_t have;       /* bytes in line[] */
    size_t trailer;    /* trailer bytes so far (capped like a head) */
    char line[SB_EGRESS_HEAD_MAX]; /* the head or line being collected */
} sb_egress_h1_t;

void sb_egress_h1_init(sb_egress_h1_t *p);

/* Feed `n` bytes the box sent; what goes upstream is appended to `out`.
 * 0, or -1 after a refusal: `*status` is the HTTP status to answer (400,
 * 403, 405, 431, 501) and `*why` static text; the parser is then DEAD. */
int sb_egress_h1_feed(sb_egress_h1_t *p, const sb_egress_inject_t *inj,
                      const char *in, size_t n, buf_t *out, int *status,
                      const char **why);

/* Is the header line `line` (len bytes, no CRLF) named `name`? */
bool sb_egress_h1_is_header(const char *line, size_t len, const char *name);

/* May `name` be a secret's header? Not a token, or one that frames or
 * routes the request (Host, Content-Length, Transfer-Encoding,
 * Connection, Upgrade, TE, Trailer, Keep-Alive, Expect, Proxy-*): false. */
bool sb_egress_h1_header_ok(const char *name);

#endif
