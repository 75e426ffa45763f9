/*
 * sb_egress_http: the request head a client sends the egress proxy,
 * parsed without I/O: "CONNECT host:port HTTP/1.1" or an absolute-form
 * "GET http://host[:port]/path HTTP/1.1", and its Host header.
 */
#ifndef SANDBOX_SB_EGRESS_HTTP_H
#define SANDBOX_SB_EGRESS_HTTP_H

#include "sandbox/sb_egress_rule.h"

#include <stdbool.h>
#include <stddef.h>

#define SB_EGRESS_HEAD_MAX 16384 /* bytes of a request head */

typedef struct sb_egress_req {
    char method[16];                         /* "CONNECT", "GET", ... */
    bool connect;                            /* method is CONNECT */
    char host[SB_EGRESS_HOST_MAX + 3];       /* as written ([v6] kept) */
    unsigned port;                           /* explicit, or 80 / 443 */
    char authority[SB_EGRESS_HOST_MAX + 10]; /* host[:port] as written */
    size_t path_off, path_len; /* plain: origin-form path in the head */
    size_t version_off;        /* plain: where " HTTP/1.x\r\n" starts */
    char host_header[SB_EGRESS_HOST_MAX + 10]; /* plain: Host value, or "" */
    bool has_host_header;                      /* plain: a Host line came */
} sb_egress_req_t;

/* Parse the head `h` (len bytes, ending with the blank line). 0, or -1
 * with `why` (static text) naming what is wrong. */
int sb_egress_req_parse(const char *h, size_t len, sb_egress_req_t *r,
                        const char **why);

/* Does the plain request's Host header name its target? (case-insensitive,
 * ":80" optional) */
bool sb_egress_req_host_matches(const sb_egress_req_t *r);

/* Is header line `line` (len bytes, no CRLF) one the proxy drops before
 * passing a plain request on (Proxy-*, Connection, Keep-Alive)? */
bool sb_egress_req_hop_header(const char *line, size_t len);

#endif
