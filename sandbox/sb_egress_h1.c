/*
 * sb_egress_h1: the request stream inside a terminated TLS connection
 * (see sb_egress_h1.h).
 */
#include "sandbox/sb_egress_h1.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define S_CL_MAX (1ULL << 62) /* the largest Content-Length or chunk */

void
sb_egress_h1_init(sb_egress_h1_t *p)
{
    memset(p, 0, sizeof *p);
    p->state = SB_H1_HEAD;
}

static int
s_fail(sb_egress_h1_t *p, int code, const char *text, int *status,
       const char **why)
{
    p->state = SB_H1_DEAD;
    *status = code;
    *why = text;
    return -1;
}

static bool
s_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool
sb_egress_h1_is_header(const char *line, size_t len, const char *name)
{
    size_t n = strlen(name);
    return len > n && line[n] == ':' && strncasecmp(line, name, n) == 0;
}

bool
sb_egress_h1_header_ok(const char *name)
{
    static const char *const framing[] = {
        "host", "content-length", "transfer-encoding", "connection", "upgrade",
        "te",   "trailer",        "keep-alive",        "expect"};
    size_t n = strlen(name);
    if (n == 0 || n > SB_EGRESS_HEADER_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!s_tchar((unsigned char)name[i]))
            return false;
    for (size_t i = 0; i < sizeof framing / sizeof framing[0]; i++)
        if (strcasecmp(name, framing[i]) == 0)
            return false;
    return strncasecmp(name, "proxy-", 6) != 0;
}

/* A header value without the blanks around it. */
static void
s_trim(const char **v, const char **ve)
{
    while (*v < *ve && (**v == ' ' || **v == '\t'))
        (*v)++;
    while (*ve > *v && ((*ve)[-1] == ' ' || (*ve)[-1] == '\t'))
        (*ve)--;
}

/* Does the Host value v..ve name the CONNECT host (and port)? */
static bool
s_host_ok(const sb_egress_inject_t *inj, const char *v, const char *ve)
{
    size_t hn = strlen(inj->host), n = (size_t)(ve - v);
    if (n < hn || strncasecmp(v, inj->host, hn) != 0)
        return false;
    if (n == hn)
        return inj->port == 443;
    char port[8];
    int pn = snprintf(port, sizeof port, ":%u", inj->port);
    return n - hn == (size_t)pn && memcmp(v + hn, port, (size_t)pn) == 0;
}

/* A decimal Content-Length; -1 if it is not one. */
static int
s_length(const char *v, const char *ve, uint64_t *out)
{
    if (v == ve || ve - v > 19)
        return -1;
    uint64_t x = 0;
    for (; v < ve; v++) {
        if (*v < '0' || *v > '9')
            return -1;
        x = x * 10 + (uint64_t)(*v - '0');
    }
    if (x > S_CL_MAX)
        return -1;
    *out = x;
    return 0;
}

/* After a request's body: the next head, or raw bytes after Upgrade. */
static void
s_request_done(sb_egress_h1_t *p)
{
    p->state = p->upgrade ? SB_H1_RAW : SB_H1_HEAD;
    p->have = 0;
}

/* The head h (len bytes, ending in the blank line) checked and written
 * to out with the secret's header in place of the box's. */
static int
s_head(sb_egress_h1_t *p, const sb_egress_inject_t *inj, const char *h,
       size_t len, buf_t *out, int *status, const char **why)
{
    if (memchr(h, '\0', len))
        return s_fail(p, 400, "a NUL byte in the request head", status, why);
    const char *eol = memchr(h, '\n', len);
    if (!eol || eol == h || eol[-1] != '\r')
        return s_fail(p, 400, "the request line does not end in CRLF", status,
                      why);
    size_t ll = (size_t)(eol - 1 - h);
    const char *sp1 = memchr(h, ' ', ll);
    const char *sp2 =
        sp1 ? memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - h)) : NULL;
    if (!sp1 || !sp2 || sp1 == h || sp1 - h >= 16 || sp2 == sp1 + 1 ||
        memchr(h, '\r', ll))
        return s_fail(p, 400, "the request line is not METHOD TARGET VERSION",
                      status, why);
    for (const char *c = h; c < sp1; c++)
        if (!isupper((unsigned char)*c))
            return s_fail(p, 400, "the method is not an upper-case token",
                          status, why);
    const char *ver = sp2 + 1;
    bool http10 = (size_t)(eol - 1 - ver) == 8 && !memcmp(ver, "HTTP/1.0", 8);
    if (!http10 &&
        ((size_t)(eol - 1 - ver) != 8 || memcmp(ver, "HTTP/1.1", 8) != 0))
        return s_fail(p, 400, "the version is not HTTP/1.1 or HTTP/1.0", status,
                      why);
    size_t ml = (size_t)(sp1 - h);
    if ((ml == 7 && !memcmp(h, "CONNECT", 7)) ||
        (ml == 5 && !memcmp(h, "TRACE", 5)))
        return s_fail(p, 405,
                      "CONNECT and TRACE are refused to a host with a "
                      "--net-secret (TRACE would echo the secret back)",
                      status, why);
    const char *target = sp1 + 1;
    if (target[0] != '/' && !(sp2 == target + 1 && target[0] == '*'))
        return s_fail(p, 400,
                      "inside TLS the target must be a path (origin form)",
                      status, why);
    int rc = buf_append(out, h, (size_t)(eol + 1 - h));
    unsigned hosts = 0, lengths = 0, codings = 0;
    uint64_t cl = 0;
    p->upgrade = false;
    const char *ln = eol + 1, *end = h + len;
    for (;;) {
        const char *e = memchr(ln, '\n', (size_t)(end - ln));
        if (!e || e == ln || e[-1] != '\r' ||
            memchr(ln, '\r', (size_t)(e - 1 - ln)))
            return s_fail(p, 400, "a header line does not end in CRLF", status,
                          why);
        size_t n = (size_t)(e - 1 - ln);
        if (n == 0)
            break; /* the blank line: the caller cut the head there */
        if (ln[0] == ' ' || ln[0] == '\t')
            return s_fail(p, 400, "obsolete line folding in a header", status,
                          why);
        const char *colon = memchr(ln, ':', n);
        if (!colon || colon == ln)
            return s_fail(p, 400, "a header line is not NAME: VALUE", status,
                          why);
        for (const char *c = ln; c < colon; c++)
            if (!s_tchar((unsigned char)*c))
                return s_fail(p, 400, "a header name is not a token", status,
                              why);
        const char *v = colon + 1, *ve = ln + n;
        s_trim(&v, &ve);
        if (sb_egress_h1_is_header(ln, n, "host")) {
            if (++hosts > 1)
                return s_fail(p, 400, "more than one Host header", status, why);
            if (!s_host_ok(inj, v, ve))
                return s_fail(p, 403,
                              "the Host header inside TLS is not the "
                              "CONNECT host",
                              status, why);
        } else if (sb_egress_h1_is_header(ln, n, "content-length")) {
            if (++lengths > 1 || s_length(v, ve, &cl) < 0)
                return s_fail(p, 400,
                              "Content-Length is not one decimal number",
                              status, why);
        } else if (sb_egress_h1_is_header(ln, n, "transfer-encoding")) {
            if (++codings > 1 || ve - v != 7 || strncasecmp(v, "chunked", 7))
                return s_fail(p, 501,
                              "the only transfer coding passed is one "
                              "'chunked'",
                              status, why);
        } else if (sb_egress_h1_is_header(ln, n, "upgrade")) {
            p->upgrade = true;
        }
        if (!sb_egress_h1_is_header(ln, n, inj->header))
            rc |= buf_append(out, ln, n + 2);
        ln = e + 1;
    }
    if (!hosts)
        return s_fail(p, 400, "the request has no Host header", status, why);
    if (codings && (lengths || http10))
        return s_fail(p, 400,
                      "both Transfer-Encoding and Content-Length (or "
                      "chunked in HTTP/1.0): refused as request smuggling",
                      status, why);
    rc |= buf_printf(out, "%s: ", inj->header);
    rc |= buf_append(out, inj->value, inj->value_len);
    rc |= buf_append(out, "\r\n\r\n", 4);
    if (rc)
        return s_fail(p, 500, "the rewritten head is too large", status, why);
    p->requests++;
    p->have = 0;
    if (codings) {
        p->state = SB_H1_CHUNK_LINE;
    } else if (cl) {
        p->state = SB_H1_BODY;
        p->left = cl;
    } else {
        s_request_done(p);
    }
    return 0;
}

/* A chunk-size line (CRLF included) in line[0..have). */
static int
s_chunk_line(sb_egress_h1_t *p, buf_t *out, int *status, const char **why)
{
    const char *l = p->line;
    size_t n = p->have;
    if (n < 3 || l[n - 2] != '\r')
        return s_fail(p, 400, "a chunk-size line does not end in CRLF", status,
                      why);
    uint64_t size = 0;
    size_t i = 0;
    for (; i < n - 2 && isxdigit((unsigned char)l[i]); i++) {
        if (i == 15)
            return s_fail(p, 400, "a chunk is too large", status, why);
        int d = isdigit((unsigned char)l[i]) ? l[i] - '0'
                                             : (tolower(l[i]) - 'a' + 10);
        size = size * 16 + (uint64_t)d;
    }
    if (i == 0 || (i < n - 2 && l[i] != ';' && l[i] != ' ' && l[i] != '\t') ||
        memchr(l, '\r', n - 2) || memchr(l, '\0', n))
        return s_fail(p, 400, "a chunk-size line is not HEX[;ext]", status,
                      why);
    if (buf_append(out, l, n) < 0)
        return s_fail(p, 500, "out of buffer", status, why);
    p->have = 0;
    if (size == 0) {
        p->state = SB_H1_TRAILER;
        p->trailer = 0;
    } else {
        p->state = SB_H1_CHUNK_DATA;
        p->left = size;
    }
    return 0;
}

/* A trailer line (CRLF included) in line[0..have): passed unless it is
 * named like the secret's header; the blank one ends the request. */
static int
s_trailer_line(sb_egress_h1_t *p, const sb_egress_inject_t *inj, buf_t *out,
               int *status, const char **why)
{
    const char *l = p->line;
    size_t n = p->have;
    p->trailer += n;
    if (n < 2 || l[n - 2] != '\r' || memchr(l, '\r', n - 2) ||
        memchr(l, '\0', n))
        return s_fail(p, 400, "a trailer line does not end in CRLF", status,
                      why);
    if (p->trailer > SB_EGRESS_HEAD_MAX)
        return s_fail(p, 431, "the trailers are larger than 16 KiB", status,
                      why);
    if (n > 2 && (l[0] == ' ' || l[0] == '\t' || !memchr(l, ':', n)))
        return s_fail(p, 400, "a trailer line is not NAME: VALUE", status, why);
    p->have = 0;
    if (n > 2 && sb_egress_h1_is_header(l, n - 2, inj->header))
        return 0;
    if (buf_append(out, l, n) < 0)
        return s_fail(p, 500, "out of buffer", status, why);
    if (n == 2)
        s_request_done(p);
    return 0;
}

int
sb_egress_h1_feed(sb_egress_h1_t *p, const sb_egress_inject_t *inj,
                  const char *in, size_t n, buf_t *out, int *status,
                  const char **why)
{
    size_t i = 0;
    while (i < n) {
        size_t rest = n - i;
        switch (p->state) {
        case SB_H1_DEAD:
            return s_fail(p, 400, "the connection was refused before", status,
                          why);
        case SB_H1_RAW:
            if (buf_append(out, in + i, rest) < 0)
                return s_fail(p, 500, "out of buffer", status, why);
            i = n;
            break;
        case SB_H1_BODY:
        case SB_H1_CHUNK_DATA: {
            size_t take = rest < p->left ? rest : (size_t)p->left;
            if (buf_append(out, in + i, take) < 0)
                return s_fail(p, 500, "out of buffer", status, why);
            i += take;
            p->left -= take;
            if (p->left)
                break;
            if (p->state == SB_H1_BODY) {
                s_request_done(p);
            } else {
                p->state = SB_H1_CHUNK_CRLF;
                p->left = 2;
            }
            break;
        }
        case SB_H1_CHUNK_CRLF:
            if (in[i] != (p->left == 2 ? '\r' : '\n'))
                return s_fail(p, 400, "chunk data does not end in CRLF", status,
                              why);
            if (buf_append(out, in + i, 1) < 0)
                return s_fail(p, 500, "out of buffer", status, why);
            i++;
            if (--p->left == 0) {
                p->state = SB_H1_CHUNK_LINE;
                p->have = 0;
            }
            break;
        case SB_H1_HEAD: {
            size_t before = p->have, room = sizeof p->line - p->have;
            size_t take = rest < room ? rest : room;
            memcpy(p->line + p->have, in + i, take);
            p->have += take;
            size_t from = before > 3 ? before - 3 : 0;
            const char *e =
                memmem(p->line + from, p->have - from, "\r\n\r\n", 4);
            if (!e) {
                if (p->have == sizeof p->line)
                    return s_fail(p, 431, "the request head is over 16 KiB",
                                  status, why);
                i += take;
                break;
            }
            size_t hl = (size_t)(e + 4 - p->line);
            i += hl - before; /* what came after the head is fed again */
            if (s_head(p, inj, p->line, hl, out, status, why) < 0)
                return -1;
            break;
        }
        case SB_H1_CHUNK_LINE:
        case SB_H1_TRAILER: {
            const char *nl = memchr(in + i, '\n', rest);
            size_t take = nl ? (size_t)(nl + 1 - (in + i)) : rest;
            size_t cap = SB_EGRESS_CHUNK_LINE;
            if (p->have + take > cap)
                return s_fail(p, p->state == SB_H1_TRAILER ? 431 : 400,
                              "a chunk-size or trailer line is over 4 KiB",
                              status, why);
            memcpy(p->line + p->have, in + i, take);
            p->have += take;
            i += take;
            if (!nl)
                break;
            if (p->state == SB_H1_CHUNK_LINE
                    ? s_chunk_line(p, out, status, why) < 0
                    : s_trailer_line(p, inj, out, status, why) < 0)
                return -1;
            break;
        }
        }
    }
    return 0;
}
