/*
 * sb_egress_http: request-head parsing for the egress proxy.
 */
#include "sandbox/sb_egress_http.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Split "host[:port]" (host may be "[v6]") of length n into r. */
static int
s_authority(const char *a, size_t n, unsigned dflt, sb_egress_req_t *r)
{
    if (n == 0 || n >= sizeof r->authority || memchr(a, '@', n))
        return -1;
    memcpy(r->authority, a, n);
    r->authority[n] = '\0';
    const char *colon = NULL;
    if (a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (!close)
            return -1;
        if ((size_t)(close + 1 - a) < n) {
            if (close[1] != ':')
                return -1;
            colon = close + 1;
        }
    } else {
        colon = memchr(a, ':', n);
    }
    size_t hn = colon ? (size_t)(colon - a) : n;
    if (hn == 0 || hn >= sizeof r->host)
        return -1;
    memcpy(r->host, a, hn);
    r->host[hn] = '\0';
    r->port = dflt;
    if (colon) {
        size_t pn = n - hn - 1;
        char pb[8];
        if (pn == 0 || pn >= sizeof pb)
            return -1;
        memcpy(pb, colon + 1, pn);
        pb[pn] = '\0';
        char *end = NULL;
        unsigned long v = strtoul(pb, &end, 10);
        if (!isdigit((unsigned char)pb[0]) || *end || v == 0 || v > 65535)
            return -1;
        r->port = (unsigned)v;
    }
    for (const char *c = r->host; *c; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
            return -1;
    return 0;
}

int
sb_egress_req_parse(const char *h, size_t len, sb_egress_req_t *r,
                    const char **why)
{
    memset(r, 0, sizeof *r);
    const char *eol = memchr(h, '\n', len);
    if (!eol || eol == h || eol[-1] != '\r') {
        *why = "the request line does not end in CRLF";
        return -1;
    }
    size_t ll = (size_t)(eol - 1 - h);
    const char *sp1 = memchr(h, ' ', ll);
    const char *sp2 =
        sp1 ? memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - h)) : NULL;
    if (!sp1 || !sp2 || (size_t)(sp1 - h) >= sizeof r->method || sp1 == h) {
        *why = "the request line is not METHOD TARGET VERSION";
        return -1;
    }
    memcpy(r->method, h, (size_t)(sp1 - h));
    for (char *c = r->method; *c; c++)
        if (!isupper((unsigned char)*c)) {
            *why = "the method is not an HTTP token in upper case";
            return -1;
        }
    const char *ver = sp2 + 1;
    size_t vl = (size_t)(eol - 1 - ver);
    if (vl != 8 || (memcmp(ver, "HTTP/1.1", 8) && memcmp(ver, "HTTP/1.0", 8))) {
        *why = "the version is not HTTP/1.0 or HTTP/1.1";
        return -1;
    }
    const char *t = sp1 + 1;
    size_t tl = (size_t)(sp2 - t);
    r->connect = strcmp(r->method, "CONNECT") == 0;
    if (r->connect) {
        if (s_authority(t, tl, 0, r) < 0 || r->port == 0) {
            *why = "CONNECT needs host:port";
            return -1;
        }
        return 0;
    }
    if (tl < 8 || strncasecmp(t, "http://", 7) != 0) {
        *why = "a plain request needs an absolute http:// URL (HTTPS goes "
               "through CONNECT)";
        return -1;
    }
    const char *a = t + 7;
    size_t al = strcspn(a, "/? ");
    if (a + al > sp2)
        al = (size_t)(sp2 - a);
    if (s_authority(a, al, 80, r) < 0) {
        *why = "the URL's host[:port] is malformed (no user@ allowed)";
        return -1;
    }
    r->path_off = (size_t)(a + al - h);
    r->path_len = (size_t)(sp2 - (a + al));
    r->version_off = (size_t)(sp2 - h);
    /* Headers: one Host line at most. */
    const char *p = eol + 1, *end = h + len;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e || e == p || e[-1] != '\r') {
            *why = "a header line does not end in CRLF";
            return -1;
        }
        size_t n = (size_t)(e - 1 - p);
        if (n == 0)
            break;
        if (n > 5 && strncasecmp(p, "host:", 5) == 0) {
            if (r->has_host_header) {
                *why = "more than one Host header";
                return -1;
            }
            r->has_host_header = true;
            const char *v = p + 5, *ve = p + n;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t vn = (size_t)(ve - v);
            if (vn >= sizeof r->host_header) {
                *why = "the Host header is too long";
                return -1;
            }
            memcpy(r->host_header, v, vn);
            r->host_header[vn] = '\0';
        }
        p = e + 1;
    }
    return 0;
}

bool
sb_egress_req_host_matches(const sb_egress_req_t *r)
{
    if (!r->has_host_header)
        return false;
    if (strcasecmp(r->host_header, r->authority) == 0)
        return true;
    char with[sizeof r->host_header + 8];
    snprintf(with, sizeof with, "%s:%u", r->host, r->port);
    if (strcasecmp(r->host_header, with) == 0)
        return true;
    /* The default port may be written on one side only. */
    return r->port == 80 && strcasecmp(r->host_header, r->host) == 0;
}

bool
sb_egress_req_hop_header(const char *line, size_t len)
{
    static const char *const drop[] = {"proxy-", "connection:", "keep-alive:"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) {
        size_t n = strlen(drop[i]);
        if (len >= n && strncasecmp(line, drop[i], n) == 0)
            return true;
    }
    return false;
}
