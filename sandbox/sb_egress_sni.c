/*
 * sb_egress_sni: ClientHello server_name extraction (RFC 8446 4.1.2,
 * RFC 6066 3). The handshake message may span several records; their
 * fragments are joined into a bounded local buffer first.
 */
#include "sandbox/sb_egress_sni.h"

#include <stdint.h>
#include <string.h>

/* A cursor over [p, end): every read checks what is left. */
typedef struct {
    const unsigned char *p, *end;
} s_cur_t;

static int
s_u8(s_cur_t *c, unsigned *v)
{
    if (c->end - c->p < 1)
        return -1;
    *v = c->p[0];
    c->p += 1;
    return 0;
}

static int
s_u16(s_cur_t *c, unsigned *v)
{
    if (c->end - c->p < 2)
        return -1;
    *v = (unsigned)c->p[0] << 8 | c->p[1];
    c->p += 2;
    return 0;
}

static int
s_skip(s_cur_t *c, size_t n)
{
    if ((size_t)(c->end - c->p) < n)
        return -1;
    c->p += n;
    return 0;
}

/* A sub-cursor of `n` bytes, advancing `c` past them. */
static int
s_sub(s_cur_t *c, size_t n, s_cur_t *out)
{
    if ((size_t)(c->end - c->p) < n)
        return -1;
    out->p = c->p;
    out->end = c->p + n;
    c->p += n;
    return 0;
}

static sb_egress_sni_rc_t
s_server_name(s_cur_t *ext, char *name, size_t size)
{
    unsigned list_len;
    s_cur_t list;
    if (s_u16(ext, &list_len) < 0 || s_sub(ext, list_len, &list) < 0)
        return SB_SNI_NOT_TLS;
    while (list.p < list.end) {
        unsigned type, n;
        s_cur_t host;
        if (s_u8(&list, &type) < 0 || s_u16(&list, &n) < 0 ||
            s_sub(&list, n, &host) < 0)
            return SB_SNI_NOT_TLS;
        if (type != 0)
            continue;
        if (n == 0 || n >= size || memchr(host.p, 0, n))
            return SB_SNI_NOT_TLS;
        memcpy(name, host.p, n);
        name[n] = '\0';
        return SB_SNI_FOUND;
    }
    return SB_SNI_NONE;
}

sb_egress_sni_rc_t
sb_egress_sni_parse(const unsigned char *data, size_t len, char *name,
                    size_t size)
{
    static const size_t rec_hdr = 5;
    unsigned char hs[SB_EGRESS_HELLO_MAX];
    size_t have = 0, need = 0;
    s_cur_t in = {data, data + len};
    /* Join handshake fragments until the message is whole. */
    for (;;) {
        unsigned type, ver, rlen;
        if ((size_t)(in.end - in.p) < rec_hdr)
            return SB_SNI_MORE;
        if (s_u8(&in, &type) < 0 || s_u16(&in, &ver) < 0 ||
            s_u16(&in, &rlen) < 0)
            return SB_SNI_NOT_TLS;
        if (type != 22 || (ver >> 8) != 3 || rlen == 0 || rlen > 16384)
            return SB_SNI_NOT_TLS;
        if ((size_t)(in.end - in.p) < rlen)
            return SB_SNI_MORE;
        if (have + rlen > sizeof hs)
            return SB_SNI_NOT_TLS;
        memcpy(hs + have, in.p, rlen);
        have += rlen;
        in.p += rlen;
        if (need == 0 && have >= 4) {
            if (hs[0] != 1) /* client_hello */
                return SB_SNI_NOT_TLS;
            need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
            if (need > sizeof hs)
                return SB_SNI_NOT_TLS;
        }
        if (need && have >= need)
            break;
    }
    s_cur_t c = {hs + 4, hs + need};
    unsigned n;
    s_cur_t exts;
    if (s_skip(&c, 2 + 32) < 0 ||                 /* version, random */
        s_u8(&c, &n) < 0 || s_skip(&c, n) < 0 ||  /* session id */
        s_u16(&c, &n) < 0 || s_skip(&c, n) < 0 || /* cipher suites */
        s_u8(&c, &n) < 0 || s_skip(&c, n) < 0)    /* compression */
        return SB_SNI_NOT_TLS;
    if (c.p == c.end)
        return SB_SNI_NONE; /* no extensions at all */
    if (s_u16(&c, &n) < 0 || s_sub(&c, n, &exts) < 0)
        return SB_SNI_NOT_TLS;
    while (exts.p < exts.end) {
        unsigned etype, elen;
        s_cur_t body;
        if (s_u16(&exts, &etype) < 0 || s_u16(&exts, &elen) < 0 ||
            s_sub(&exts, elen, &body) < 0)
            return SB_SNI_NOT_TLS;
        if (etype == 0)
            return s_server_name(&body, name, size);
    }
    return SB_SNI_NONE;
}
